/**
 * The documentation travels with the code: every relative link in README.md, CHANGELOG.md and docs/ names a file of this
 * repository, so a fresh clone has everything its documents point to (README.md once linked the interface
 * document at ../shared/interface.md, outside the repository).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { marked } from 'marked';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Made by `npm ci` and the build, never committed: a link into them is dead in a fresh clone. */
const GENERATED = ['node_modules', 'dist'];

/** README.md, CHANGELOG.md, and every Markdown document under docs/, in subfolders too (docs/deploy/). */
const DOCUMENTS = [
  'README.md',
  'CHANGELOG.md',
  ...(fs.readdirSync(path.join(ROOT, 'docs'), { recursive: true }) as string[])
    .filter((name) => name.endsWith('.md'))
    .map((name) => path.join('docs', name)),
];

/** Every link and image target of a Markdown text, as CommonMark reads it (none from code spans or blocks). */
function targets(markdown: string): string[] {
  const found: string[] = [];
  marked.walkTokens(marked.lexer(markdown), (token) => {
    if (token.type === 'link' || token.type === 'image') found.push(token.href);
  });
  return found;
}

/** A link with a scheme (https:, mailto:), protocol-relative, or to an anchor of the same page leaves no file to check. */
function isRelativeFileLink(target: string): boolean {
  return !/^[a-z][a-z0-9+.-]*:/i.test(target) && !target.startsWith('//') && !target.startsWith('#');
}

/** What is wrong with each relative link of `markdown`, a document at `document` (relative to `root`). */
function brokenLinks(root: string, document: string, markdown: string): string[] {
  const broken: string[] = [];
  for (const target of targets(markdown).filter(isRelativeFileLink)) {
    const filePart = decodeURIComponent(target.replace(/[?#].*$/s, ''));
    // GitHub reads a leading slash as the repository's root.
    const resolved = filePart.startsWith('/') ? path.join(root, filePart) : path.resolve(root, path.dirname(document), filePart);
    const inRepository = path.relative(root, resolved);
    if (inRepository.startsWith('..') || path.isAbsolute(inRepository)) {
      broken.push(`${document}: ${target} points outside the repository`);
    } else if (GENERATED.includes(inRepository.split(path.sep)[0] as string)) {
      broken.push(`${document}: ${target} points into ${inRepository.split(path.sep)[0]}/, which a clone does not have`);
    } else if (!fs.existsSync(resolved)) {
      broken.push(`${document}: ${target} names no file of the repository`);
    }
  }
  return broken;
}

describe('documentation links', () => {
  it('every relative link in README.md, CHANGELOG.md and docs/**/*.md names a file inside the repository', () => {
    assert.ok(DOCUMENTS.includes(path.join('docs', 'deploy', 'README.md')), 'documents in subfolders of docs/ are checked');
    let checked = 0;
    const broken: string[] = [];
    for (const document of DOCUMENTS) {
      const markdown = fs.readFileSync(path.join(ROOT, document), 'utf8');
      checked += targets(markdown).filter(isRelativeFileLink).length;
      broken.push(...brokenLinks(ROOT, document, markdown));
    }
    assert.deepEqual(broken, []);
    assert.ok(checked >= 5, `links were found to check (${checked})`);
  });

  it('README.md links the interface document 1.0.0, kept in the repository', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    assert.ok(targets(readme).includes('docs/interface.md'), 'README.md links docs/interface.md');
    const document = fs.readFileSync(path.join(ROOT, 'docs', 'interface.md'), 'utf8');
    assert.match(document, /^# Plant Store Service Interface\n/);
    assert.match(document, /carries the version number 1\.0\.0 and is licensed under the MIT license/);
  });

  it('the check finds links outside the repository, to missing files and into generated folders, and only those', () => {
    const markdown = [
      '[outside](../shared/interface.md) [missing](docs/nowhere.md) [generated](dist/src/cli.js)',
      '[present](docs/design.md#group-commit) [rooted](/package.json) [anchor](#the-contract) [web](https://example.com/x.md)',
      '[escaped](docs/design%2Emd) ![image](docs/missing.png) [reference][ref]',
      '`[in code](nowhere-in-code.md)`',
      '```',
      '[in a block](nowhere-in-block.md)',
      '```',
      '[ref]: ../elsewhere.md',
    ].join('\n');
    assert.deepEqual(brokenLinks(ROOT, 'README.md', markdown), [
      'README.md: ../shared/interface.md points outside the repository',
      'README.md: docs/nowhere.md names no file of the repository',
      'README.md: dist/src/cli.js points into dist/, which a clone does not have',
      'README.md: docs/missing.png names no file of the repository',
      'README.md: ../elsewhere.md points outside the repository',
    ]);
  });
});
