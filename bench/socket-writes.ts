/**
 * What one write to a TCP socket costs the writing process on this machine, by size: the change feed's fan-out is
 * one such write per stream per read of the change log (BENCHMARKS.md, "Change feed"), so whether fewer, larger
 * writes would cost less is a question of this curve.
 *
 *   npm run --silent compile && node dist/bench/socket-writes.js [SOCKETS] [ROUNDS]
 *
 * This process accepts SOCKETS loopback connections from a child process that reads them all into one reused buffer
 * (onread), as the feed bench's reader does; then, for each size, writes that many bytes to every socket ROUNDS times,
 * a pause between rounds so the reader keeps up, and reports its own CPU (user and system, from process.cpuUsage) per
 * write and per byte. On loopback a write also runs the receiving side's TCP in the writer's system call.
 */
import { fork } from 'node:child_process';
import net from 'node:net';
import { round } from './metrics.js';

const SIZES = [1024, 8192, 32768, 65536];
/** Between rounds: long enough for the reader to empty every socket, so no write meets a full one. */
const PAUSE_MS = 20;
const READ_BUFFER_BYTES = 256 * 1024;

async function writer(sockets: number, rounds: number): Promise<void> {
  const accepted: net.Socket[] = [];
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    accepted.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const reader = fork(new URL(import.meta.url), ['reader', String(port), String(sockets)]);
  try {
    await new Promise<void>((resolve, reject) => {
      reader.once('message', () => resolve());
      reader.once('exit', (code) => reject(new Error(`the reader exited (${code}) before connecting`)));
    });
    while (accepted.length < sockets) await new Promise((resolve) => setTimeout(resolve, 10));
    for (const size of SIZES) {
      const payload = Buffer.alloc(size, 'a');
      const before = process.cpuUsage();
      for (let index = 0; index < rounds; index += 1) {
        for (const socket of accepted) socket.write(payload);
        await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
      }
      const used = process.cpuUsage(before);
      const micros = used.user + used.system;
      const writes = rounds * accepted.length;
      process.stdout.write(JSON.stringify({ sockets, bytesPerWrite: size, cpuMicrosPerWrite: round(micros / writes, 2), cpuNanosPerByte: round((micros * 1000) / writes / size, 3) }) + '\n');
    }
  } finally {
    reader.kill();
    for (const socket of accepted) socket.destroy();
    server.close();
  }
}

function readerProcess(port: number, sockets: number): void {
  const buffer = Buffer.alloc(READ_BUFFER_BYTES);
  let connected = 0;
  for (let index = 0; index < sockets; index += 1) {
    const socket = net.connect({ port, host: '127.0.0.1', onread: { buffer, callback: () => true } });
    socket.on('error', () => {});
    socket.once('connect', () => {
      connected += 1;
      if (connected === sockets) process.send?.('connected');
    });
  }
}

if (process.argv[2] === 'reader') readerProcess(Number(process.argv[3]), Number(process.argv[4]));
else await writer(Number(process.argv[2] ?? 1000), Number(process.argv[3] ?? 40));
