import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { newPlantReader } from '../../http/new-plant.js';
import { importPlants, type ImportCounts } from '../../transfer/import.js';
import { readLines } from '../../transfer/lines.js';
import { openForReading } from '../arguments.js';
import type { CommandContext } from '../command.js';
import { EXISTING_DATABASE, NEW_OR_EXISTING_DATABASE, withStore } from '../database.js';
import { UsageError } from '../errors.js';
import { ProgressLine } from '../output.js';

export const usage = `  import [FILE] [--dry-run]   store the NewPlant JSON lines of FILE (default: standard input), each
                              validated as POST /plants validates a body; identical plants are skipped,
                              invalid and conflicting lines reported; --dry-run checks, writes nothing`;

function importSummary(counts: Readonly<ImportCounts>, dryRun: boolean): string {
  return (
    `${counts.lines} lines: ${counts.created} ${dryRun ? 'to create' : 'created'}, ${counts.identical} identical (skipped), ` +
    `${counts.conflicting} conflicting, ${counts.invalid} invalid, ${counts.blank} blank (skipped)`
  );
}

export async function run(args: string[], context: CommandContext): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { 'dry-run': { type: 'boolean' } }, allowPositionals: true, strict: true });
  if (positionals.length > 1) throw new UsageError('import reads one FILE (or standard input)');
  const [file] = positionals;
  const dryRun = values['dry-run'] === true;
  const config = context.config();
  const fromStdin = file === undefined || file === '-';
  const input = fromStdin
    ? process.stdin
    : fs.createReadStream('', { fd: openForReading(file, 'import FILE', 'name a file of NewPlant JSON lines, or - for standard input') });
  if (fromStdin && process.stdin.isTTY) process.stderr.write('reading NewPlant JSON lines from the terminal; end with Ctrl-D\n');
  const progress = new ProgressLine();
  const label = dryRun ? 'import --dry-run' : 'import';
  // A dry run writes nothing, a new database included: it compares with a database that is there.
  await withStore(config, dryRun ? EXISTING_DATABASE : NEW_OR_EXISTING_DATABASE, async (store) => {
    let counts: ImportCounts;
    try {
      counts = await importPlants({
        store: store.plants,
        lines: readLines(input, config.limits.bodyBytes),
        readPlant: newPlantReader(config.limits),
        maxLineBytes: config.limits.bodyBytes,
        batchSize: config.writes.batchLimit,
        dryRun,
        onProblem: (line, reason) => progress.line(`line ${line}: ${reason}`),
        onProgress: (current) => progress.update(`${label}: ${importSummary(current, dryRun)}`),
      });
    } finally {
      progress.clear();
    }
    process.stderr.write(`${label}: ${importSummary(counts, dryRun)}${dryRun ? '; nothing was written' : ''}\n`);
    if (counts.conflicting + counts.invalid > 0) process.exitCode = 1;
  });
}
