/**
 * The shutdown watchdog of `plantstore serve` (started by ./signals.ts): `node shutdown-watchdog.js <pid> <deadline>`.
 * Its stdin is a pipe from the server, one line per change of what the shutdown still waits for. If the pipe ends,
 * the server has ended, and so does the watchdog. If the deadline (a Date.now() time) comes first, it writes what
 * was still pending to stderr (the server's) and kills the server with SIGKILL, the one signal nothing in it can
 * delay. A separate process, so that neither a blocked event loop nor an exit that waits on a stuck thread in the
 * server can hold it back.
 */
const [pidArgument, deadlineArgument] = process.argv.slice(2);
const pid = Number(pidArgument);
const deadline = Number(deadlineArgument);
if (!Number.isInteger(pid) || pid <= 1 || !Number.isFinite(deadline)) {
  process.stderr.write('plantstore shutdown watchdog: usage: shutdown-watchdog.js <pid> <deadline>\n');
  process.exit(2);
}

let pending = 'nothing reported';
let partial = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  const lines = (partial + chunk).split('\n');
  partial = lines.pop() ?? '';
  const last = lines.filter((line) => line !== '').at(-1);
  // Bounded whatever the server sends: only the latest line is kept.
  if (last !== undefined) pending = last.slice(0, 4096);
  if (partial.length > 4096) partial = '';
});
process.stdin.on('end', () => process.exit(0));
// Signals meant for the server (a terminal closing, a supervisor signalling a group) do not end the watchdog.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);
process.stdin.on('error', () => process.exit(0));

setTimeout(() => {
  process.stderr.write(
    `plantstore: shutdown watchdog: the server (pid ${pid}) has not ended by its deadline; still pending: ${pending}; ` +
      'killing it with SIGKILL\n',
  );
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Ended meanwhile.
  }
  process.exit(0);
}, Math.max(0, deadline - Date.now()));
