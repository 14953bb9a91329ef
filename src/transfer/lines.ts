/** One line of an input, numbered from 1, without its `\n`; a line over the limit is reported by its length alone. */
export type InputLine =
  | { readonly number: number; readonly text: Buffer }
  | { readonly number: number; readonly tooLongBytes: number };

/** The text of every blank line: one Buffer, not a view of the chunk per line. */
const EMPTY = Buffer.alloc(0);

/**
 * Splits a byte stream into lines at `\n`, as the stream delivers it: the caller's `for await` pulls the next chunk
 * only when it has dealt with the lines of this one, so a fast source waits for a slow consumer (the stream pauses)
 * and memory holds a chunk plus at most `maxBytes` of an unfinished line. A longer line is not kept: only its length
 * is counted until its end, then reported. Lines come in arrays, one per chunk, so a small line costs no await.
 * A last line without `\n` is a line; the `\n` ending the input does not start another.
 *
 * With `blankRuns`, a run of blank lines (isBlank) within a chunk is one line, numbered as the last of the run, its
 * text empty: the numbers of the lines after it are unchanged, and ten million `\n` sent to a server cost a few
 * objects rather than a Buffer view each (a view per line would grow the heap with the count of blank lines).
 * Without it, as a count of lines needs, every blank line is one.
 */
export async function* readLines(chunks: AsyncIterable<Buffer | string>, maxBytes: number, { blankRuns = false } = {}): AsyncGenerator<InputLine[]> {
  let parts: Buffer[] = [];
  let length = 0;
  let number = 0;
  const finish = (): InputLine => {
    number += 1;
    const line: InputLine = length > maxBytes ? { number, tooLongBytes: length } : { number, text: parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, length) };
    parts = [];
    length = 0;
    return line;
  };
  for await (const chunk of chunks) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    const lines: InputLine[] = [];
    for (let start = 0; ; ) {
      const end = buffer.indexOf(0x0a, start);
      if (blankRuns && length === 0 && end !== -1 && blankBetween(buffer, start, end)) {
        number += 1;
        const previous = lines.at(-1);
        if (previous !== undefined && previous.number === number - 1 && 'text' in previous && previous.text === EMPTY) {
          (previous as { number: number }).number = number;
        } else lines.push({ number, text: EMPTY });
        start = end + 1;
        continue;
      }
      const piece = buffer.subarray(start, end === -1 ? buffer.length : end);
      if (length + piece.length <= maxBytes) parts.push(piece);
      else parts = [];
      length += piece.length;
      if (end === -1) break;
      lines.push(finish());
      start = end + 1;
    }
    if (lines.length > 0) yield lines;
  }
  if (length > 0) yield [finish()];
}

/** JSON's whitespace without the newline: a line of nothing else holds no value. */
export function isBlank(text: Buffer): boolean {
  return blankBetween(text, 0, text.length);
}

function blankBetween(buffer: Buffer, start: number, end: number): boolean {
  for (let at = start; at < end; at += 1) {
    const byte = buffer[at];
    if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0d) return false;
  }
  return true;
}
