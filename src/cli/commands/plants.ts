import { parseArgs } from 'node:util';
import { plantJson } from '../../json/plant-json.js';
import type { CommandContext } from '../command.js';
import { EXISTING_DATABASE, withStore } from '../database.js';
import { UsageError } from '../errors.js';
import { writeOut } from '../output.js';

export const usage = `  plants list [--tag T] [--limit N]
                              print stored plants in ascending id order, one JSON object per line
                              (exact ids); only those tagged exactly T; the first N (default: all)`;

/** Rows read per keyset query when listing; output streams, so memory stays flat on any table size. */
const LIST_BATCH = 1000;

export async function run(args: string[], context: CommandContext): Promise<void> {
  const [action, ...rest] = args;
  if (action !== 'list') throw new UsageError(`unknown plants command ${JSON.stringify(action ?? '')}`);
  const { values } = parseArgs({ args: rest, options: { tag: { type: 'string' }, limit: { type: 'string' } }, strict: true });
  let remaining = Number.POSITIVE_INFINITY;
  if (values.limit !== undefined) {
    if (!/^[1-9][0-9]{0,14}$/.test(values.limit)) throw new UsageError('plants list --limit needs a positive integer');
    remaining = Number(values.limit);
  }
  const tag = values.tag;
  await withStore(context.config(), EXISTING_DATABASE, async (store) => {
    let after: bigint | undefined;
    while (remaining > 0) {
      const limit = Math.min(LIST_BATCH, remaining);
      const rows = await store.plants.list({
        limit,
        ...(after === undefined ? {} : { after }),
        ...(tag === undefined ? {} : { tag }),
      });
      if (rows.length === 0) return;
      const text = rows.map((row) => `${plantJson(row)}\n`).join('');
      // A reader that stops early (`| head`) ends the listing quietly.
      if (!(await writeOut(text))) return;
      remaining -= rows.length;
      after = rows.at(-1)?.id;
      if (rows.length < limit) return;
    }
  });
}
