/**
 * The `--scrapers` scenario's scrapers, in their own process on the load core: `connections` keep-alive connections,
 * each sending GET /metrics again as soon as the previous answer has been read, with the token given (or none, an
 * anonymous flood). Argument: a JSON object {url, connections, token}. It counts answers by status and answers a
 * "counts" message on its IPC channel with them; the bench going away ends it.
 */
import { Agent, request } from 'node:http';

const { url, connections, token } = JSON.parse(process.argv[2] ?? '{}') as { url: string; connections: number; token: string | null };
const agent = new Agent({ keepAlive: true, maxSockets: connections });
const statuses: Record<string, number> = {};
let bytes = 0;
let stopped = false;

function scrapeForever(): void {
  if (stopped) return;
  const call = request(`${url}/metrics`, { agent, headers: token ? { authorization: `Bearer ${token}` } : {} }, (response) => {
    const status = String(response.statusCode);
    response.on('data', (chunk: Buffer) => (bytes += chunk.length));
    response.on('end', () => {
      statuses[status] = (statuses[status] ?? 0) + 1;
      scrapeForever();
    });
  });
  call.on('error', () => setTimeout(scrapeForever, 10));
  call.end();
}

for (let index = 0; index < connections; index += 1) scrapeForever();
process.on('message', (message) => {
  if (message === 'counts') process.send?.({ statuses, bytes });
});
process.on('disconnect', () => {
  stopped = true;
  process.exit(0);
});
process.stdout.write('scraping\n');
