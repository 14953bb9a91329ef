/**
 * A fault for test/process/signals.test.ts, loaded into a server with `node --import`: once the server has handled
 * SIGTERM (its handler runs in the same emit as this listener), the main event loop is blocked for a minute, as by a
 * synchronous call that never returns. Nothing on that loop can then end the shutdown; only what runs outside it can.
 */
process.on('SIGTERM', () => {
  setImmediate(() => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000));
});
