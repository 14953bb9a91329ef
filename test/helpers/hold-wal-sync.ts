/**
 * Test-only, preloaded into a server process with `node --import` (test/process/sync-hold-crash.test.ts): holds every
 * fs.fdatasync and fs.fdatasyncSync of this thread while the file named by HOLD_WAL_SYNC_WHILE_EXISTS exists, then lets
 * it run. The SQLite store syncs its WAL with one of them on the main thread (src/storage/sqlite/wal-sync.ts: on the
 * thread pool, or on the event loop, which a held fdatasyncSync blocks), so a test can stop a server between a commit
 * and its sync, and kill it there. Nothing in src/ reads that variable; a server started
 * without this module never holds a sync.
 */
import fs from 'node:fs';

const gate = process.env.HOLD_WAL_SYNC_WHILE_EXISTS;
if (gate) {
  const fdatasync = fs.fdatasync;
  const held = (fd: number, callback: (error: NodeJS.ErrnoException | null) => void): void => {
    if (fs.existsSync(gate)) setTimeout(() => held(fd, callback), 5);
    else fdatasync(fd, callback);
  };
  (fs as { fdatasync: unknown }).fdatasync = held;
  const fdatasyncSync = fs.fdatasyncSync;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  (fs as { fdatasyncSync: unknown }).fdatasyncSync = (fd: number): void => {
    while (fs.existsSync(gate)) Atomics.wait(pause, 0, 0, 5);
    fdatasyncSync(fd);
  };
}
