/**
 * A client process sending creates from one address as a program would with Node's own HTTP clients: `fetch` (on
 * undici's global pool, every setting at its default) or an undici `Pool` (default options). `concurrency` workers
 * each send their next create as soon as the last is answered, `total` in all; the summary (test/helpers/clients.ts)
 * is printed as one JSON line.
 *   node node-creates.js fetch|pool URL TOKEN CONCURRENCY TOTAL FIRST_ID [LOCAL_ADDRESS]
 *
 * With LOCAL_ADDRESS, connections come from it (fetch then runs on an undici Agent of its own, otherwise at its
 * defaults): the bench's two clients under contention are two addresses.
 */
import { Agent, Pool } from 'undici';
import { summarize, type Outcome } from '../helpers/client-summary.js';

const [mode, base = '', token = '', concurrencyText = '16', totalText = '1000', firstIdText = '1', localAddress] = process.argv.slice(2);
const concurrency = Number(concurrencyText);
const total = Number(totalText);
const firstId = BigInt(firstIdText);
const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
const pool = mode === 'pool' ? new Pool(base, localAddress ? { localAddress } : {}) : undefined;
const agent = mode !== 'pool' && localAddress ? new Agent({ localAddress }) : undefined;

async function create(id: bigint): Promise<number> {
  const body = `{"id":${id},"name":"client ${id}"}`;
  if (pool) {
    const answer = await pool.request({ path: '/plants', method: 'POST', headers, body });
    await answer.body.arrayBuffer();
    return answer.statusCode;
  }
  // undici's own Agent type and the one Node's fetch is typed with are two copies of one shape.
  const response = await fetch(`${base}/plants`, { method: 'POST', headers, body, ...(agent ? { dispatcher: agent } : {}) } as RequestInit);
  await response.arrayBuffer();
  return response.status;
}

function code(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current; depth += 1) {
    const found = (current as { code?: unknown }).code;
    if (typeof found === 'string') return found;
    current = (current as { cause?: unknown }).cause;
  }
  return String(error);
}

const outcomes: Outcome[] = [];
let next = 0;
const started = performance.now();
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (next < total) {
      const id = firstId + BigInt(next);
      next += 1;
      const at = performance.now();
      try {
        const status = await create(id);
        outcomes.push({ status, ms: performance.now() - at });
      } catch (error) {
        outcomes.push({ error: code(error), ms: performance.now() - at });
      }
    }
  }),
);
const elapsedMs = performance.now() - started;
await pool?.close();
await agent?.close();
process.stdout.write(`${JSON.stringify(summarize(outcomes, elapsedMs))}\n`);
