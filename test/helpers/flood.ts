/**
 * Loading a real `plantstore serve` and measuring what it holds: its resident memory (from /proc, so Linux only),
 * GET /healthz latency from a fresh connection, and a flooding client whose connections pipeline requests and never
 * read an answer.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';

/** Peak (VmHWM) and current (VmRSS) resident memory of a process, in MiB. */
export function residentMemoryMiB(pid: number): { peakMiB: number; currentMiB: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) / 1024;
  return { peakMiB: field('VmHWM'), currentMiB: field('VmRSS') };
}

/** Current resident memory of a process, in MiB. */
export function rssMiB(pid: number): number {
  return residentMemoryMiB(pid).currentMiB;
}

/** Milliseconds for GET /healthz on a fresh connection (one that no flood shares); fails unless it answers 200. */
export async function healthzMs(base: string): Promise<number> {
  const start = performance.now();
  const response = await fetch(`${base}/healthz`, { headers: { connection: 'close' }, signal: AbortSignal.timeout(10_000) });
  await response.text();
  assert.equal(response.status, 200);
  return performance.now() - start;
}

/**
 * The attacking client, in Python because it sets SO_RCVBUF (Node cannot): with a 4 KiB receive buffer the kernel
 * takes almost none of the answers, so what the server holds is what it chose to keep. Every connection is opened
 * first, then each writes all its requests at once and never reads; it prints "flooding" once the writes have started
 * (or, with "until-sent", once every connection has written all or been closed), and ends when its standard input
 * closes.
 */
const FLOOD_CLIENT = `
import base64, socket, sys, threading
port, connections, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
payload = base64.b64decode(sys.argv[4]) * count
until_sent = sys.argv[5] == "until-sent"
sources = sys.argv[6].split(",")
def flood(s):
    try:
        s.sendall(payload)
    except OSError:
        pass
sockets = []
for i in range(connections):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind((sources[i % len(sources)], 0))
    s.connect(("127.0.0.1", port))
    sockets.append(s)
threads = [threading.Thread(target=flood, args=(s,), daemon=True) for s in sockets]
for t in threads:
    t.start()
if until_sent:
    for t in threads:
        t.join()
print("flooding", flush=True)
sys.stdin.buffer.read()
`;

export interface Flood {
  /** Closes the flood's connections and waits for its client to exit. */
  end(): Promise<void>;
}

/**
 * `connections` connections to 127.0.0.1:`port`, each writing `count` copies of `request` at once and never reading
 * an answer. Resolves once the writes have started, or with `untilSent` once every connection has written all its
 * requests (or been closed by the server). The connections come from `sources` in turn (loopback addresses; by
 * default 127.0.0.1 alone): the server shares its connections among addresses when it is full.
 */
export async function flood(
  port: number,
  request: string,
  count: number,
  connections: number,
  options: { untilSent?: boolean; sources?: readonly string[] } = {},
): Promise<Flood> {
  const encoded = Buffer.from(request).toString('base64');
  const child = spawn('python3', ['-c', FLOOD_CLIENT, String(port), String(connections), String(count), encoded, options.untilSent ? 'until-sent' : 'started', (options.sources ?? ['127.0.0.1']).join(',')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  assert.equal(line.toString().trim(), 'flooding');
  return {
    end: async () => {
      child.stdin.end();
      await exited;
    },
  };
}
