/** One line of an input, numbered from 1, without its `\n`; a line over the limit is reported by its length alone. */
export type InputLine =
  | { readonly number: number; readonly text: Buffer }
  | { readonly number: number; readonly tooLongBytes: number };

/**
 * Splits a byte stream into lines at `\n`, as the stream delivers it: the caller's `for await` pulls the next chunk
 * only when it has dealt with the lines of this one, so a fast source waits for a slow consumer (the stream pauses)
 * and memory holds a chunk plus at most `maxBytes` of an unfinished line. A longer line is not kept: only its length
 * is counted until its end, then reported. Lines come in arrays, one per chunk, so a small line costs no await.
 * A last line without `\n` is a line; the `\n` ending the input does not start another.
 */
export async function* readLines(chunks: AsyncIterable<Buffer | string>, maxBytes: number): AsyncGenerator<InputLine[]> {
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
  for (const byte of text) if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0d) return false;
  return true;
}
