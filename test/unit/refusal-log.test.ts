/**
 * RefusalLog and toErrorReply alone, with a logger that records: a write refused for a full write queue is answered
 * 503 and counted, never logged at error level with a stack; a burst is one warn line at once and one per interval
 * with the count of the rest.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { toErrorReply } from '../../src/http/error-reply.js';
import { RefusalLog } from '../../src/http/refusal-log.js';
import { WriteQueueFullError } from '../../src/plants/write-bound.js';

/** A logger that keeps every line: its level, fields and message. */
function recordingLog(): { log: FastifyBaseLogger; lines: Array<{ level: string; fields: Record<string, unknown>; message: string }> } {
  const lines: Array<{ level: string; fields: Record<string, unknown>; message: string }> = [];
  const at = (level: string) => (fields: Record<string, unknown> | string, message?: string) => {
    lines.push(typeof fields === 'string' ? { level, fields: {}, message: fields } : { level, fields, message: message ?? '' });
  };
  const log = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') } as unknown as FastifyBaseLogger;
  return { log, lines };
}

describe('refusals for a full write queue', () => {
  it('are answered 503 and counted, one warn line for a burst and one per interval, never an error with a stack', async () => {
    const { log, lines } = recordingLog();
    const refusals = new RefusalLog(log, 50);
    for (let index = 0; index < 1000; index += 1) {
      const reply = toErrorReply(new WriteQueueFullError(), log, 1024, refusals);
      assert.equal(reply.status, 503);
      assert.deepEqual(reply.body, { error: 503, message: 'the write queue is full; retry shortly' });
    }
    assert.equal(lines.length, 1, 'the first refusal of a burst is logged at once, the rest counted');
    while (lines.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(lines.map(({ level }) => level), ['warn', 'warn']);
    assert.deepEqual(lines.map(({ fields }) => fields.refused), [1, 999]);
    assert.match(lines[1]?.message ?? '', /^refused 999 write\(s\) with 503: the write queue was full/);
    assert.ok(lines.every(({ fields }) => fields.err === undefined), 'no error object, so no stack');
    refusals.stop();
  });

  it('logs what is still counted when stopped, and other 503s as before', () => {
    const { log, lines } = recordingLog();
    const refusals = new RefusalLog(log, 60_000);
    toErrorReply(new WriteQueueFullError(), log, 1024, refusals);
    toErrorReply(new WriteQueueFullError(), log, 1024, refusals);
    refusals.stop();
    assert.deepEqual(lines.map(({ fields }) => fields.refused), [1, 1]);
    // Without a RefusalLog, a warn line with no stack.
    toErrorReply(new WriteQueueFullError(), log, 1024);
    assert.equal(lines.at(-1)?.level, 'warn');
    assert.equal(lines.at(-1)?.fields.err, undefined);
    // A fault is still an error with its stack.
    toErrorReply(new Error('boom'), log, 1024, refusals);
    assert.equal(lines.at(-1)?.level, 'error');
    assert.ok(lines.at(-1)?.fields.err instanceof Error);
  });
});
