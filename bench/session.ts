/**
 * Orchestration of one bench invocation: its temporary folder (under --db-dir), its store, the servers it starts and
 * the load runs against them. withSession releases whatever is still held, servers first, however the scenario ends.
 */
import fs from 'node:fs';
import path from 'node:path';
import { cliOf } from './layout.js';
import { runLoad, type LoadMeasurement, type LoadPlace, type LoadRun } from './measure.js';
import type { RunConditions } from './report.js';
import type { EnvOverrides } from '../test/helpers/process.js';
import { startPlantstore, startTokenServer, stopServer, type BenchServer } from './servers.js';
import { openStore, type StoreHandle } from './stores.js';

export interface BenchSetup extends RunConditions {
  /** Progress, on stderr. */
  readonly log: (line: string) => void;
}

export class BenchSession {
  readonly #servers = new Set<BenchServer>();
  readonly #place: LoadPlace;

  constructor(
    readonly setup: BenchSetup,
    /** The bench's temporary folder: the SQLite file, plantstore's log, wrk's scripts. */
    readonly dir: string,
    readonly store: StoreHandle,
  ) {
    this.#place = { pinning: setup.pinning, generator: setup.generator, scriptDir: dir };
  }

  /** The ceiling or app-only server, checking `token`. */
  async startTokenServer(name: 'ceiling' | 'app-only', token: string): Promise<BenchServer> {
    return this.#track(await startTokenServer({ pinning: this.setup.pinning, token, name }));
  }

  /** plantstore on the session's store; its output goes to `logFile`, which the caller may count afterwards. */
  async startPlantstore(env: EnvOverrides = {}): Promise<BenchServer> {
    const { options } = this.setup;
    const cpuProfDir = options.cpuProf ? path.join(options.out, 'profiles') : undefined;
    if (cpuProfDir) fs.mkdirSync(cpuProfDir, { recursive: true });
    return this.#track(
      await startPlantstore({
        pinning: this.setup.pinning,
        databaseUrl: this.store.databaseUrl,
        logFile: this.logFile,
        cpuProfDir,
        cli: this.plantstoreCli,
        env,
      }),
    );
  }

  /**
   * The A/B's baseline (--baseline, --baseline-env): another build and/or other settings, on a copy of the session's
   * SQLite file taken now (so it holds the same plants and token; the baseline must accept this checkout's schema).
   */
  async startBaseline(): Promise<BenchServer | undefined> {
    const { baseline } = this.setup.options;
    if (!baseline) return undefined;
    const file = path.join(this.dir, 'baseline.db');
    fs.copyFileSync(this.store.databaseUrl.slice('sqlite:'.length), file);
    return this.#track(
      await startPlantstore({
        pinning: this.setup.pinning,
        databaseUrl: `sqlite:${file}`,
        logFile: path.join(this.dir, 'baseline.log'),
        cli: cliOf(baseline.root),
        env: baseline.env,
        name: 'baseline',
      }),
    );
  }

  /** The CLI of the checkout being measured: this one, or the one --plantstore names. */
  get plantstoreCli(): string {
    return cliOf(this.setup.options.plantstoreRoot);
  }

  /** Where plantstore's stdout and stderr go. */
  get logFile(): string {
    return path.join(this.dir, 'plantstore.log');
  }

  /** Stops a server; resolves with its exit code. */
  async stop(server: BenchServer): Promise<number | null> {
    this.#servers.delete(server);
    return stopServer(server);
  }

  runLoad(run: LoadRun): Promise<LoadMeasurement> {
    return runLoad(this.#place, run);
  }

  #track(server: BenchServer): BenchServer {
    this.#servers.add(server);
    return server;
  }

  /** Servers still running (the scenario failed part-way): stopped, errors ignored. */
  async stopAll(): Promise<void> {
    for (const server of [...this.#servers]) await this.stop(server).catch(() => undefined);
  }
}

export async function withSession<T>(setup: BenchSetup, scenario: (session: BenchSession) => Promise<T>): Promise<T> {
  const { options } = setup;
  const dir = fs.mkdtempSync(path.join(options.dbDir, 'plantstore-bench-'));
  let store: StoreHandle | undefined;
  let session: BenchSession | undefined;
  try {
    store = await openStore({ kind: options.store, prefill: options.prefill, ids: options.ids, dir, log: setup.log });
    session = new BenchSession(setup, dir, store);
    return await scenario(session);
  } finally {
    await session?.stopAll();
    await store?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
