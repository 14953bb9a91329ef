import path from 'node:path';
import { parseArgs } from 'node:util';
import { AtomicFileWriter } from '../../storage/atomic-file.js';
import { exportPlants } from '../../transfer/export.js';
import { requireFolderFor } from '../arguments.js';
import type { CommandContext } from '../command.js';
import { EXISTING_DATABASE, withStore } from '../database.js';
import { UsageError } from '../errors.js';
import { writeOut } from '../output.js';

export const usage = `  export [--out FILE] [--tag T]
                              print every plant (only those tagged T) as JSON lines in id order; with
                              --out, write them to FILE, which appears only once complete`;

export async function run(args: string[], context: CommandContext): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { out: { type: 'string' }, tag: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) throw new UsageError('export takes no FILE argument; use --out FILE');
  if (values.out === '') throw new UsageError('export --out needs a FILE');
  const tag = values.tag;
  const options = tag === undefined ? {} : { tag };
  // Checked before the database is opened, so that a mistyped folder is the one thing reported.
  const file = values.out === undefined ? undefined : path.resolve(values.out);
  if (file !== undefined) requireFolderFor(file, 'export --out');
  await withStore(context.config(), EXISTING_DATABASE, async (store) => {
    if (file === undefined) {
      await exportPlants(store.plants, { ...options, write: writeOut });
      return;
    }
    const output = await AtomicFileWriter.open(file);
    let written: number;
    try {
      written = await exportPlants(store.plants, {
        ...options,
        write: async (text) => {
          await output.write(text);
          return true;
        },
      });
      await output.commit();
    } catch (error) {
      await output.abort();
      throw error;
    }
    process.stderr.write(`exported ${written} plants to ${file}\n`);
  });
}
