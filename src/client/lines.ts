/**
 * Reading a streamed answer: NDJSON lines (a bulk create's results) and Server-Sent Events (the change feed), from
 * a fetch body as it arrives. Each bounds the text it holds: a broken server cannot grow one line without end.
 */

/**
 * The bytes of a body cut at line ends: each piece holds whole lines only (a line split across reads is joined to its
 * end first), the last piece also a last line without its line end. The bytes stay as they came, off the JavaScript
 * heap, until a reader decodes the lines it takes one by one: no string of a whole read lives while its lines are used.
 */
export async function* wholeLines(body: ReadableStream<Uint8Array>, maxLineBytes: number): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  let pending: Uint8Array | undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        if (pending !== undefined && pending.length > 0) yield pending;
        return;
      }
      let bytes = value;
      if (pending !== undefined) {
        const head = bytes.indexOf(0x0a);
        const joined = new Uint8Array(pending.length + (head === -1 ? bytes.length : head + 1));
        joined.set(pending);
        joined.set(head === -1 ? bytes : bytes.subarray(0, head + 1), pending.length);
        pending = undefined;
        if (head === -1) {
          bytes = joined;
        } else {
          yield joined;
          bytes = bytes.subarray(head + 1);
        }
      }
      const last = bytes.lastIndexOf(0x0a);
      if (last + 1 < bytes.length) pending = bytes.slice(last + 1);
      if (pending !== undefined && pending.length > maxLineBytes) throw new Error(`the server answered a line of more than ${maxLineBytes} bytes, which is no result line`);
      if (last !== -1) yield bytes.subarray(0, last + 1);
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}

/**
 * Bytes decoded at a time by decodedLines: one call per few dozen lines, and no more than this much text alive
 * while its lines are used.
 */
const SEGMENT_BYTES = 4096;

/**
 * The lines of `bytes` (whole lines, as wholeLines gives them) as strings, blank ones skipped, a CR before the LF
 * dropped. Decoded a segment of whole lines at a time.
 */
export function* decodedLines(bytes: Uint8Array, decoder: { decode(input: Uint8Array): string }): Generator<string, void, undefined> {
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.length;
    if (start + SEGMENT_BYTES < end) {
      const lf = bytes.lastIndexOf(0x0a, start + SEGMENT_BYTES - 1);
      const next = lf >= start ? lf : bytes.indexOf(0x0a, start + SEGMENT_BYTES);
      if (next !== -1) end = next + 1;
    }
    const text = decoder.decode(bytes.subarray(start, end));
    let from = 0;
    while (from < text.length) {
      let to = text.indexOf('\n', from);
      if (to === -1) to = text.length;
      const stop = to > from && text.charCodeAt(to - 1) === 0x0d ? to - 1 : to;
      if (stop > from) yield text.slice(from, stop);
      from = to + 1;
    }
    start = end;
  }
}

/** One event of a text/event-stream. */
export interface StreamEvent {
  readonly event: string;
  readonly id: string | undefined;
  readonly data: string;
}

/**
 * The events of a text/event-stream body (WHATWG HTML, "Interpreting an event stream"): fields `event`, `id`, `data`
 * (lines joined by \n) and `retry`; comments skipped. A stream may end its lines with CR, LF or CRLF.
 */
export async function* streamEvents(body: ReadableStream<Uint8Array>, onRetry: (ms: number) => void, maxEventChars: number): AsyncGenerator<StreamEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  let event = 'message';
  let id: string | undefined;
  let data: string[] = [];
  let held = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      pending += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = pending.search(/\r\n|\r|\n/)) !== -1) {
        // A CR at the chunk's end may be the first half of a CRLF: wait for the next chunk to tell.
        if (pending.charCodeAt(end) === 0x0d && end === pending.length - 1) break;
        const line = pending.slice(0, end);
        pending = pending.slice(end + (pending.startsWith('\r\n', end) ? 2 : 1));
        if (line === '') {
          if (data.length > 0) yield { event, id, data: data.join('\n') };
          event = 'message';
          id = undefined;
          data = [];
          held = 0;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        let text = colon === -1 ? '' : line.slice(colon + 1);
        if (text.startsWith(' ')) text = text.slice(1);
        if (field === 'event') event = text;
        else if (field === 'id') id = text;
        else if (field === 'data') {
          data.push(text);
          held += text.length;
        } else if (field === 'retry' && /^\d+$/.test(text)) onRetry(Number(text));
      }
      if (pending.length + held > maxEventChars) throw new Error(`the server sent an event of more than ${maxEventChars} characters`);
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}
