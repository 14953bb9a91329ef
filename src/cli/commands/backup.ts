import { requireSqliteFile } from '../../storage/open.js';
import { backupDatabase } from '../../storage/sqlite/backup.js';
import { oneFile, requireFolderFor } from '../arguments.js';
import type { CommandContext } from '../command.js';
import { sqlitePathFor } from '../database.js';

export const usage = `  backup FILE                 write a consistent copy of the SQLite database to FILE while servers keep
                              running (PostgreSQL: use pg_dump)`;

export function run(args: string[], context: CommandContext): void {
  const file = oneFile(args, 'backup');
  requireFolderFor(file, 'backup FILE');
  const database = sqlitePathFor(context.config(), 'backup');
  requireSqliteFile(database);
  const summary = backupDatabase(database, file);
  process.stderr.write(
    `backed up ${database} to ${file}: ${summary.plants} plants, ${summary.tokens} tokens, schema version ${summary.schemaVersion}; integrity check ok\n`,
  );
}
