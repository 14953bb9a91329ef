/**
 * The ceiling: what one core can do for POST /plants with no framework, no storage and no logging. It reads the
 * body, checks the bearer token against the one known token, JSON.parse, checks the types (id an integer, name a
 * string, tag absent or a string) and answers the Plant `{"name","tag"}`. Everything plantstore does beyond this
 * (validation rules, int64 exactness, routing, durability, logging) is what the ratio prices.
 *
 * Env: PORT (default 0: any), HOST (127.0.0.1), BENCH_TOKEN (required). Prints "listening <port>" once ready.
 */
import http from 'node:http';

const token = process.env.BENCH_TOKEN;
if (!token) {
  process.stderr.write('ceiling: BENCH_TOKEN is required\n');
  process.exit(2);
}
const expected = `Bearer ${token}`;
const BODY_LIMIT = 16 * 1024;

function answer(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const server = http.createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/plants') return answer(res, 404, '{"error":"not found"}');
  if (req.headers.authorization !== expected) return answer(res, 401, '{"error":"unauthorized"}');
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= BODY_LIMIT) chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > BODY_LIMIT) return answer(res, 413, '{"error":"too large"}');
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks, size).toString('utf8'));
    } catch {
      return answer(res, 400, '{"error":"not JSON"}');
    }
    const plant = body as { id?: unknown; name?: unknown; tag?: unknown } | null;
    if (
      plant === null ||
      typeof plant !== 'object' ||
      !Number.isInteger(plant.id) ||
      typeof plant.name !== 'string' ||
      (plant.tag !== undefined && typeof plant.tag !== 'string')
    ) {
      return answer(res, 400, '{"error":"invalid plant"}');
    }
    answer(res, 200, JSON.stringify(plant.tag === undefined ? { name: plant.name } : { name: plant.name, tag: plant.tag }));
  });
});
server.keepAliveTimeout = 5000;
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
