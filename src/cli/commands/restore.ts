import { sqliteFileExists } from '../../storage/open.js';
import { restoreDatabase } from '../../storage/sqlite/backup.js';
import { oneFile } from '../arguments.js';
import type { CommandContext } from '../command.js';
import { reportCreated, sqlitePathFor } from '../database.js';

export const usage = `  restore FILE                replace the SQLite database with the backup FILE, after checking it;
                              refused while a server or another command has the database open`;

export function run(args: string[], context: CommandContext): void {
  const file = oneFile(args, 'restore');
  const database = sqlitePathFor(context.config(), 'restore');
  const existed = sqliteFileExists(database);
  const summary = restoreDatabase(file, database);
  if (!existed) reportCreated(database);
  process.stderr.write(
    `restored ${file} into ${database}: ${summary.plants} plants, ${summary.tokens} tokens; ` +
      'tokens revoked since the backup was taken are valid again: revoke them again\n',
  );
}
