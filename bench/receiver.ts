/**
 * The `--webhook` scenario's subscriber, in its own process so that it runs on the load core (`taskset -c 1`) as a
 * subscriber on another machine would, not on the server's core. It answers 204 at once, counts requests and distinct
 * webhook-ids, prints its port as one JSON line, and answers a "counts" message on its IPC channel.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';

const ids = new Set<string>();
let requests = 0;
const server = createServer((request, response) => {
  requests += 1;
  ids.add(String(request.headers['webhook-id']));
  request.resume();
  request.on('end', () => {
    response.writeHead(204);
    response.end();
  });
});
server.listen(0, '127.0.0.1');
await once(server, 'listening');
process.on('message', (message) => {
  if (message === 'counts') process.send?.({ requests, events: ids.size });
});
// The bench going away ends the receiver too.
process.on('disconnect', () => process.exit(0));
process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
