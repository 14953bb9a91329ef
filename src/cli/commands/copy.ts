import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { loadConfig, type DatabaseConfig } from '../../config/config.js';
import { ConfigError } from '../../config/variables.js';
import { openStore } from '../../storage/open.js';
import { copyDatabase } from '../../transfer/copy.js';
import type { CommandContext } from '../command.js';
import { EXISTING_DATABASE, NEW_OR_EXISTING_DATABASE, describeDatabase, withStore } from '../database.js';
import { UsageError } from '../errors.js';
import { ProgressLine } from '../output.js';

export const usage = `  copy --to URL               copy plants, tokens and webhook subscriptions from DATABASE_URL into the
                              database at URL (e.g. SQLite to PostgreSQL), then compare both sides; safe
                              to run again`;

function sameDatabase(a: DatabaseConfig, b: DatabaseConfig): boolean {
  if (a.kind === 'sqlite' && b.kind === 'sqlite') {
    const real = (file: string) => {
      try {
        return fs.realpathSync(file);
      } catch {
        return file;
      }
    };
    return real(a.path) === real(b.path);
  }
  return a.kind === 'postgres' && b.kind === 'postgres' && a.url === b.url;
}

export async function run(args: string[], context: CommandContext): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { to: { type: 'string' } }, allowPositionals: true, strict: true });
  if (positionals.length > 0 || !values.to) throw new UsageError('copy needs --to URL (sqlite:FILE or postgres://…), and nothing else');
  const config = context.config();
  let target: DatabaseConfig;
  try {
    // The target is read as DATABASE_URL would be, with the same rules and messages.
    target = loadConfig({ ...process.env, DATABASE_URL: values.to }).database;
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(`copy --to: ${error.message.replace(/^DATABASE_URL: /, '')}`);
    throw error;
  }
  if (sameDatabase(config.database, target)) throw new UsageError('copy --to names the database DATABASE_URL names; copy into another one');
  process.stderr.write(`copy: from ${describeDatabase(config.database)} to ${describeDatabase(target)}\n`);
  const progress = new ProgressLine();
  await withStore(config, EXISTING_DATABASE, async (source) => {
    // Opening the target creates or upgrades its schema to this plantstore's, as every command does.
    const destination = await openStore(target, NEW_OR_EXISTING_DATABASE);
    try {
      const report = await (async () => {
        try {
          return await copyDatabase(source, destination, {
            batchSize: config.writes.batchLimit,
            onProgress: (section, created) => progress.update(`copy: ${created} ${section} created`),
          });
        } finally {
          progress.clear();
        }
      })();
      for (const section of report.sections) {
        const { name, created, source: ours, target: theirs } = section;
        const sides = ours.equals(theirs)
          ? `${ours.count} on both sides, checksum ${ours.checksum} on both`
          : `source ${ours.count} (checksum ${ours.checksum}), target ${theirs.count} (checksum ${theirs.checksum})`;
        process.stderr.write(`copy: ${name}: ${created} created; ${sides}\n`);
      }
      if (report.verified) {
        process.stderr.write('copy: verified: the target holds exactly what the source holds\n');
      } else {
        process.stderr.write(
          'copy: NOT verified: the two sides differ, so the source changed while the copy ran; stop writes to it and run the same copy again\n',
        );
        process.exitCode = 1;
      }
    } finally {
      await destination.close();
    }
  });
}
