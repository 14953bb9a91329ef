/**
 * Reading a streamed answer: NDJSON lines (a bulk create's results) and Server-Sent Events (the change feed), from
 * a fetch body as it arrives. Each bounds the text it holds: a broken server cannot grow one line without end.
 */

/** The text lines of a body, a batch per chunk read, without their line ends; a last line without one included. */
export async function* textLines(body: ReadableStream<Uint8Array>, maxLineChars: number): AsyncGenerator<string[]> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      const text = done ? decoder.decode() : decoder.decode(value, { stream: true });
      let start = 0;
      let end: number;
      const lines: string[] = [];
      let chunk = pending + text;
      while ((end = chunk.indexOf('\n', start)) !== -1) {
        lines.push(chunk.slice(start, chunk.charCodeAt(end - 1) === 0x0d && end > start ? end - 1 : end));
        start = end + 1;
      }
      chunk = chunk.slice(start);
      if (done && chunk !== '') lines.push(chunk);
      pending = done ? '' : chunk;
      if (pending.length > maxLineChars) throw new Error(`the server answered a line of more than ${maxLineChars} characters, which is no result line`);
      if (lines.length > 0) yield lines;
      if (done) return;
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
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
