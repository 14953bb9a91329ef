/**
 * The documentation travels with the code, and a newcomer can finish it.
 *
 * Links: every relative link in the repository's Markdown pages (the *.md at its root and every *.md under docs/,
 * subfolders included) names a file of this repository, so a fresh clone has everything its documents point to
 * (README.md once linked the interface document at ../shared/interface.md, outside the repository); and a link to a
 * section (`page.md#section`, `#section`) names a heading that page has, so moving a section from one page to another
 * cannot leave its old links pointing nowhere. A page a comment in src/, test/ or bench/ names (`docs/page.md` or
 * `BENCHMARKS.md`, with an anchor or a quoted section) exists and has that heading, for the same reason.
 *
 * Shape: no page under docs/ is over 15 KB (a deep dive gets a page of its own); docs/design.md shows every folder of
 * src/ in its diagram and its table of folders, and links every deep dive of docs/design/; the README's quick start
 * is within its first 40 lines, and its Documentation section links every page under docs/ and names every command
 * `plantstore --help` lists.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { marked, type Token } from 'marked';
import type { Command } from '../../src/cli/command.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** Made by `npm ci` and the build, never committed: a link into them is dead in a fresh clone. */
const GENERATED = ['node_modules', 'dist'];

/** The pages checked: the Markdown files at the root and under docs/ (at any depth), relative to ROOT. */
function documents(root: string): string[] {
  const top = fs.readdirSync(root).filter((name) => name.endsWith('.md'));
  const docs = (fs.readdirSync(path.join(root, 'docs'), { recursive: true }) as string[])
    .filter((name) => name.endsWith('.md'))
    .map((name) => path.join('docs', name));
  return [...top, ...docs].sort();
}

/** Every link and image target of a Markdown text, as CommonMark reads it (none from code spans or blocks). */
function targets(markdown: string): string[] {
  const found: string[] = [];
  marked.walkTokens(marked.lexer(markdown), (token) => {
    if (token.type === 'link' || token.type === 'image') found.push(token.href);
  });
  return found;
}

/** The text a heading shows: its inline tokens' text, without the Markdown around it (code spans, emphasis, links). */
function shownText(tokens: Token[]): string {
  return tokens
    .map((token) => {
      if ('tokens' in token && Array.isArray(token.tokens) && token.tokens.length > 0) return shownText(token.tokens);
      if (token.type === 'html') return '';
      return 'text' in token && typeof token.text === 'string' ? token.text : '';
    })
    .join('');
}

/**
 * GitHub's anchor for a heading: lower case, every character but letters, marks, digits, `_`, `-` and spaces
 * dropped, each space a `-`; a repeated anchor gets `-1`, `-2`, ... in page order.
 */
function headingAnchor(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a page offers: one per heading, and any `<a id>` or `<a name>` written in HTML. */
function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  marked.walkTokens(marked.lexer(markdown), (token) => {
    if (token.type === 'heading') {
      const base = headingAnchor(shownText(token.tokens ?? []));
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      found.add(count === 0 ? base : `${base}-${count}`);
    } else if (token.type === 'html') {
      for (const match of token.raw.matchAll(/<a\s[^>]*\b(?:id|name)="([^"]+)"/g)) found.add(match[1] as string);
    }
  });
  return found;
}

/** The text every heading of a page shows. */
function headings(markdown: string): string[] {
  const found: string[] = [];
  marked.walkTokens(marked.lexer(markdown), (token) => {
    if (token.type === 'heading') found.push(shownText(token.tokens ?? []));
  });
  return found;
}

/** The TypeScript files of a folder of the repository, at any depth, relative to ROOT. */
function sources(folder: string): string[] {
  return (fs.readdirSync(path.join(ROOT, folder), { recursive: true }) as string[])
    .filter((name) => name.endsWith('.ts'))
    .map((name) => path.join(folder, name));
}

/**
 * What is wrong with the pages a source file's comments name: `docs/page.md` or `BENCHMARKS.md`, with `#anchor`, or
 * `, "Section"` / ` ("Section")`, where a heading of the page starts with the section named.
 */
function brokenReferences(root: string, file: string, source: string): string[] {
  const broken: string[] = [];
  for (const match of source.matchAll(/\b((?:docs\/[\w/.-]+?|BENCHMARKS)\.md)(?:#([\w-]+))?(?:,? \(?"([^"\n]+)")?/g)) {
    const page = match[1] as string;
    const fragment = match[2];
    const sectionName = match[3];
    const resolved = path.join(root, page);
    if (!fs.existsSync(resolved)) {
      broken.push(`${file}: ${page} names no page`);
      continue;
    }
    const markdown = fs.readFileSync(resolved, 'utf8');
    if (fragment !== undefined && !anchors(markdown).has(fragment)) broken.push(`${file}: ${page}#${fragment} names no heading`);
    if (sectionName !== undefined && !headings(markdown).some((heading) => heading.startsWith(sectionName))) {
      broken.push(`${file}: ${page}, "${sectionName}" names no heading`);
    }
  }
  return broken;
}

/** A link with a scheme (https:, mailto:) or protocol-relative leaves nothing in the repository to check. */
function isExternal(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');
}

/** What is wrong with each relative link of `markdown`, a document at `document` (relative to `root`). */
function brokenLinks(root: string, document: string, markdown: string): string[] {
  const broken: string[] = [];
  for (const target of targets(markdown).filter((target) => !isExternal(target))) {
    const hash = target.indexOf('#');
    const fragment = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const filePart = decodeURIComponent(target.replace(/[?#].*$/s, ''));
    let page: string | undefined;
    if (filePart === '') {
      page = markdown;
    } else {
      // GitHub reads a leading slash as the repository's root.
      const resolved = filePart.startsWith('/') ? path.join(root, filePart) : path.resolve(root, path.dirname(document), filePart);
      const inRepository = path.relative(root, resolved);
      if (inRepository.startsWith('..') || path.isAbsolute(inRepository)) {
        broken.push(`${document}: ${target} points outside the repository`);
        continue;
      }
      if (GENERATED.includes(inRepository.split(path.sep)[0] as string)) {
        broken.push(`${document}: ${target} points into ${inRepository.split(path.sep)[0]}/, which a clone does not have`);
        continue;
      }
      if (!fs.existsSync(resolved)) {
        broken.push(`${document}: ${target} names no file of the repository`);
        continue;
      }
      if (resolved.endsWith('.md')) page = fs.readFileSync(resolved, 'utf8');
    }
    if (fragment !== undefined && page !== undefined && !anchors(page).has(fragment)) {
      broken.push(`${document}: ${target} names no heading of ${filePart === '' ? 'this page' : filePart}`);
    }
  }
  return broken;
}

describe('documentation links', () => {
  it('checks the root pages and every page under docs/, subfolders included', () => {
    const pages = documents(ROOT);
    for (const page of ['README.md', 'BENCHMARKS.md', path.join('docs', 'interface.md'), path.join('docs', 'configuration.md')]) {
      assert.ok(pages.includes(page), `${page} is checked`);
    }
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'docs-links-'));
    try {
      fs.mkdirSync(path.join(folder, 'docs', 'deploy'), { recursive: true });
      for (const file of ['README.md', 'notes.txt', 'docs/a.md', 'docs/deploy/b.md']) fs.writeFileSync(path.join(folder, file), '# x\n');
      assert.deepEqual(documents(folder), ['README.md', 'docs/a.md', path.join('docs', 'deploy', 'b.md')]);
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('every relative link in those pages names a file inside the repository, and a heading of it when it names one', () => {
    let checked = 0;
    let sections = 0;
    const broken: string[] = [];
    for (const document of documents(ROOT)) {
      const markdown = fs.readFileSync(path.join(ROOT, document), 'utf8');
      const relative = targets(markdown).filter((target) => !isExternal(target));
      checked += relative.length;
      sections += relative.filter((target) => target.includes('#')).length;
      broken.push(...brokenLinks(ROOT, document, markdown));
    }
    assert.deepEqual(broken, []);
    assert.ok(checked >= 5, `links were found to check (${checked})`);
    assert.ok(sections >= 5, `links to sections were found to check (${sections})`);
  });

  it('every page a comment in src/, test/ or bench/ names exists, with the heading it names', () => {
    const files = [...sources('src'), ...sources('test'), ...sources('bench')].filter((file) => file !== path.join('test', 'unit', 'docs.test.ts'));
    let named = 0;
    const broken: string[] = [];
    for (const file of files) {
      const source = fs.readFileSync(path.join(ROOT, file), 'utf8');
      named += [...source.matchAll(/\bdocs\/[\w/.-]+?\.md/g)].length;
      broken.push(...brokenReferences(ROOT, file, source));
    }
    assert.ok(named >= 10, `pages named in comments were found (${named})`);
    assert.deepEqual(broken, [], 'a page or section moved: name where it lives now');
  });

  it('the check of comments finds missing pages, anchors and sections, and only those', () => {
    const source = [
      '// docs/design.md, docs/nowhere.md, docs/api.md#errors, docs/api.md#nowhere',
      '// (docs/api.md, "Errors") (docs/api.md, "Nowhere") docs/design/write-path.md ("int64 without loss")',
      '// (BENCHMARKS.md, "Change feed") (BENCHMARKS.md, "Durable creates: the sync off the loop") BENCHMARKS.md#nowhere',
    ].join('\n');
    assert.deepEqual(brokenReferences(ROOT, 'x.ts', source), [
      'x.ts: docs/nowhere.md names no page',
      'x.ts: docs/api.md#nowhere names no heading',
      'x.ts: docs/api.md, "Nowhere" names no heading',
      'x.ts: BENCHMARKS.md, "Durable creates: the sync off the loop" names no heading',
      'x.ts: BENCHMARKS.md#nowhere names no heading',
    ]);
  });

  it('README.md links the interface document 1.0.0, kept in the repository', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    assert.ok(targets(readme).includes('docs/interface.md'), 'README.md links docs/interface.md');
    const document = fs.readFileSync(path.join(ROOT, 'docs', 'interface.md'), 'utf8');
    assert.match(document, /^# Plant Store Service Interface\n/);
    assert.match(document, /carries the version number 1\.0\.0 and is licensed under the MIT license/);
  });

  it('names headings as GitHub anchors them', () => {
    const cases: Array<[string, string]> = [
      ['The contract', 'the-contract'],
      ["The dispatcher's records", 'the-dispatchers-records'],
      ['The SQLite driver: node:sqlite against better-sqlite3', 'the-sqlite-driver-nodesqlite-against-better-sqlite3'],
      ['Webhook: creates with one subscription ÷ with none — npm run bench -- --webhook', 'webhook-creates-with-one-subscription--with-none--npm-run-bench------webhook'],
      ['Large stores: 5 million plants', 'large-stores-5-million-plants'],
      ['WEBHOOK_RETRY_SCHEDULE (café)', 'webhook_retry_schedule-café'],
    ];
    for (const [text, anchor] of cases) assert.equal(headingAnchor(text), anchor, text);
    const page = ['# Page', '## Run `npm test`', '## Notes', '### Notes', '<a id="kept"></a>', '```', '# not a heading', '```'].join('\n');
    assert.deepEqual([...anchors(page)].sort(), ['kept', 'notes', 'notes-1', 'page', 'run-npm-test']);
  });

  it('the check finds links outside the repository, to missing files, into generated folders and to missing sections, and only those', () => {
    const markdown = [
      '# The contract',
      '[outside](../shared/interface.md) [missing](docs/nowhere.md) [generated](dist/src/cli.js)',
      '[present](docs/design/write-path.md#group-commit) [rooted](/package.json) [anchor](#the-contract) [web](https://example.com/x.md)',
      '[escaped](docs/design%2Emd) ![image](docs/missing.png) [reference][ref]',
      '[no section](docs/design.md#no-such-section) [not here](#nowhere) [source line](src/cli/plantstore.ts#L1)',
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
      'README.md: docs/design.md#no-such-section names no heading of docs/design.md',
      'README.md: #nowhere names no heading of this page',
    ]);
    // From a page in a subfolder, links resolve from that folder.
    assert.deepEqual(brokenLinks(ROOT, path.join('docs', 'deploy', 'x.md'), '[up](../../README.md#tests) [gone](../../README.md#the-contract) [sibling](../design.md)'), [
      `${path.join('docs', 'deploy', 'x.md')}: ../../README.md#the-contract names no heading of ../../README.md`,
    ]);
  });
});

/** A page's largest size: one a newcomer reads through; a deep dive past it gets a page of its own. */
const PAGE_LIMIT_BYTES = 15_000;

/** The lines within which the README's quick start ends: the first screen of the page. */
const FIRST_SCREEN_LINES = 40;

/** The tokens of a level-2 section (its heading excluded), up to the next heading of level 2 or above. */
function section(markdown: string, heading: string): Token[] {
  const tokens = marked.lexer(markdown);
  const start = tokens.findIndex((token) => token.type === 'heading' && token.depth === 2 && token.text === heading);
  assert.ok(start >= 0, `a "## ${heading}" section`);
  const end = tokens.findIndex((token, index) => index > start && token.type === 'heading' && token.depth <= 2);
  return tokens.slice(start + 1, end === -1 ? undefined : end);
}

/** Every link target and every code span's text among `tokens`. */
function linksAndCode(tokens: Token[]): { links: string[]; code: string[] } {
  const links: string[] = [];
  const code: string[] = [];
  marked.walkTokens(tokens, (token) => {
    if (token.type === 'link') links.push(token.href);
    if (token.type === 'codespan') code.push(token.text);
  });
  return { links, code };
}

/** The command words of a usage text's lines (`token create`, `plants list`, `version`): what `plantstore --help` lists. */
function commandsIn(usage: string): string[] {
  return usage
    .split('\n')
    .filter((line) => /^ {2}\S/.test(line))
    .map((line) => {
      const words: string[] = [];
      for (const word of (line.trim().split(/ {2,}/)[0] as string).split(' ')) {
        if (!/^[a-z][a-z-]*,?$/.test(word)) break;
        words.push(word.replace(/,$/, ''));
        if (word.endsWith(',')) break;
      }
      return words.join(' ');
    });
}

/** Every command of `plantstore --help`, from each command module's usage (dist/src/cli/commands/*.js). */
async function cliCommands(): Promise<string[]> {
  const folder = path.join(ROOT, 'dist', 'src', 'cli', 'commands');
  const modules = fs.readdirSync(folder).filter((name) => name.endsWith('.js'));
  const usages = await Promise.all(modules.map(async (name) => ((await import(path.join(folder, name))) as Command).usage));
  return usages.flatMap(commandsIn);
}

describe('documentation a newcomer finishes', () => {
  it(`no page under docs/ is over ${PAGE_LIMIT_BYTES} bytes`, () => {
    const pages = documents(ROOT).filter((page) => page.startsWith(`docs${path.sep}`));
    assert.ok(pages.length >= 20, `the pages under docs/ were found (${pages.length})`);
    const over = pages
      .map((page) => ({ page, bytes: fs.statSync(path.join(ROOT, page)).size }))
      .filter(({ bytes }) => bytes > PAGE_LIMIT_BYTES)
      .map(({ page, bytes }) => `${page}: ${bytes} bytes`);
    assert.deepEqual(over, [], 'split a page over the limit: a deep dive gets a page of its own, linked from where it was');
  });

  it('docs/design.md shows every folder of src/ in its diagram and its table of folders', () => {
    const folders = fs
      .readdirSync(path.join(ROOT, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    assert.ok(folders.includes('storage') && folders.includes('cli'), `the folders of src/ were found (${folders.join(', ')})`);
    const design = fs.readFileSync(path.join(ROOT, 'docs', 'design.md'), 'utf8');
    const diagram = /```mermaid\n([\s\S]*?)\n```/.exec(design)?.[1] ?? '';
    assert.ok(diagram.length > 0, 'docs/design.md has a mermaid diagram');
    assert.deepEqual(
      folders.filter((folder) => !diagram.includes(`${folder}/`)),
      [],
      'folders of src/ missing from the diagram of docs/design.md',
    );
    const rows = linksAndCode(section(design, 'Every folder of `src/`')).code;
    assert.deepEqual(
      folders.filter((folder) => !rows.includes(`${folder}/`)),
      [],
      'folders of src/ missing from the table of docs/design.md',
    );
  });

  it("docs/design.md links every deep dive of docs/design/ from its Deep dives section", () => {
    const deepDives = fs.readdirSync(path.join(ROOT, 'docs', 'design')).filter((name) => name.endsWith('.md'));
    assert.ok(deepDives.length >= 5, `the deep dives were found (${deepDives.join(', ')})`);
    const { links } = linksAndCode(section(fs.readFileSync(path.join(ROOT, 'docs', 'design.md'), 'utf8'), 'Deep dives'));
    const linked = new Set(links.map((link) => link.replace(/#.*$/s, '')));
    assert.deepEqual(
      deepDives.filter((name) => !linked.has(`design/${name}`)),
      [],
      'deep dives that docs/design.md does not link',
    );
  });

  it(`the README's quick start ends within its first ${FIRST_SCREEN_LINES} lines`, () => {
    const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n');
    const start = lines.indexOf('## Quick start');
    assert.ok(start >= 0, 'README.md has a "## Quick start" section');
    const next = lines.findIndex((line, index) => index > start && line.startsWith('## '));
    assert.ok(next > start + 1, 'the quick start is followed by another section');
    // `next` is the 0-based index of the next heading, so the quick start's last line is line `next`.
    assert.ok(next <= FIRST_SCREEN_LINES, `the quick start runs from line ${start + 1} to line ${next}`);
    const quickStart = lines.slice(start, next).join('\n');
    for (const step of ['npm install', 'npm start', 'token create', 'curl']) assert.ok(quickStart.includes(step), `the quick start shows ${step}`);
  });

  it("the README's Documentation section links every page under docs/", () => {
    const { links } = linksAndCode(section(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'), 'Documentation'));
    const linked = new Set(links.map((link) => path.normalize(link.replace(/#.*$/s, ''))));
    const pages = documents(ROOT).filter((page) => page.startsWith(`docs${path.sep}`));
    assert.deepEqual(
      pages.filter((page) => !linked.has(page)),
      [],
      'pages under docs/ that the README does not link',
    );
  });

  it("the README's Documentation section names every command plantstore --help lists", async () => {
    const commands = await cliCommands();
    for (const command of ['serve', 'push', 'import', 'restore', 'plants list', 'token revoke', 'webhook redeliver', 'version']) {
      assert.ok(commands.includes(command), `${command} is read from the usage texts (${commands.join(', ')})`);
    }
    const { code } = linksAndCode(section(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'), 'Documentation'));
    const named = code.map((text) => text.replace(/^plantstore /, ''));
    assert.deepEqual(
      commands.filter((command) => !named.some((text) => text === command || text.startsWith(`${command} `))),
      [],
      'commands the README does not name as `plantstore COMMAND`',
    );
  });

  it('reads the command words of usage lines, and only those', () => {
    const usage = [
      '  token create --name NAME [--scope SCOPE]... [--read-only]',
      '                              create an API token; prints the token alone on stdout',
      '  token revoke NAME           revoke a token',
      '  plants list [--tag T] [--limit N]',
      '  serve                       run the HTTP service (what npm start runs)',
      '  version, --version          print plantstore\'s version',
    ].join('\n');
    assert.deepEqual(commandsIn(usage), ['token create', 'token revoke', 'plants list', 'serve', 'version']);
  });
});
