/**
 * Comments in src/ say why the code is as it is now: history (which issue, which day) lives in git, so no comment
 * carries an issue number or a date. Figures are harder to tell from a constant's meaning by pattern, so they are
 * left to review; this holds what a pattern can.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** An issue number (`issue 37`, `issues 37 and 38`, `#37`) or a date (`2026-11-28`, a year of this century). */
const HISTORY = /\bissues? #?\d+|(?<![\w/&])#\d+\b|\b20\d\d-\d\d-\d\d\b|\b20\d\d\b(?!:)/i;

/** The comment text of a TypeScript source, line by line: `//` comments and the lines of block comments. */
function commentLines(source: string): Array<{ line: number; text: string }> {
  const found: Array<{ line: number; text: string }> = [];
  let inBlock = false;
  source.split('\n').forEach((raw, index) => {
    const text = raw.trim();
    const opens = text.startsWith('/*');
    if (inBlock || opens) found.push({ line: index + 1, text });
    else if (text.startsWith('//')) found.push({ line: index + 1, text });
    else if (/\s\/\/\s/.test(raw)) found.push({ line: index + 1, text: raw.slice(raw.search(/\s\/\/\s/)).trim() });
    if (opens && !text.includes('*/')) inBlock = true;
    else if (inBlock && text.includes('*/')) inBlock = false;
  });
  return found;
}

function sources(folder: string): string[] {
  return (fs.readdirSync(path.join(ROOT, folder), { recursive: true }) as string[]).filter((name) => name.endsWith('.ts')).map((name) => path.join(folder, name));
}

describe('comments in src/', () => {
  it('carry no issue number and no date', () => {
    const files = sources('src');
    assert.ok(files.length > 50, `the sources were found (${files.length})`);
    const found = files.flatMap((file) =>
      commentLines(fs.readFileSync(path.join(ROOT, file), 'utf8'))
        .filter(({ text }) => HISTORY.test(text))
        .map(({ line, text }) => `${file}:${line}: ${text}`),
    );
    assert.deepEqual(found, [], 'history belongs in git: say why the code is as it is now');
  });

  it('are found, and only they, and the pattern finds what it should', () => {
    const source = ['/**', ' * Since issue 37 (2026-11-28).', ' */', "const a = '#12'; // see #12", '// plain', "const url = 'http://x//y';"].join('\n');
    assert.deepEqual(commentLines(source), [
      { line: 1, text: '/**' },
      { line: 2, text: '* Since issue 37 (2026-11-28).' },
      { line: 3, text: '*/' },
      { line: 4, text: '// see #12' },
      { line: 5, text: '// plain' },
    ]);
    for (const text of ['issue 37', 'issues 37 and 38', 'see #12', 'on 2026-11-28', 'in 2026']) assert.ok(HISTORY.test(text), text);
    for (const text of ['RFC 6052', '6to4 (2002::/16)', 'HTTP/1.1', 'a #private field', '&#39;', 'http://h/#12']) assert.ok(!HISTORY.test(text), text);
  });
});
