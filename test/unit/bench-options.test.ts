import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readOptions, UsageError } from '../../bench/options.js';

test('bench --help asks for the usage text (null), whatever else is on the line', () => {
  assert.equal(readOptions(['--help']), null);
  assert.equal(readOptions(['--pairs', '5', '--help']), null);
});

test('bench command lines it cannot run are usage errors naming the problem (exit 2), not crashes', () => {
  const cases: Array<[string[], RegExp]> = [
    [['--no-such-option'], /Unknown option '--no-such-option'/],
    [['--pairs'], /--pairs/],
    [['--pairs', 'many'], /--pairs must be a number >= 1, got "many"/],
    [['--ids', 'shuffled'], /--ids must be sequential or random/],
    [['--store', 'mysql'], /--store must be sqlite or postgres/],
    [['--reads', '--soak', '10'], /--reads and --soak do not combine/],
    [['--baseline-env', 'lowercase=1'], /--baseline-env takes NAME=VALUE/],
    [['--webhook', '--app-only'], /--webhook does not combine/],
    [['--webhook', '--baseline-env', 'METRICS=off'], /--webhook does not combine with .*--baseline/],
    [['--workers', '1'], /--workers must be a number >= 2, got "1"/],
    [['--workers', '2.5'], /--workers must be a whole number >= 2, got "2.5"/],
    [['--workers', '2', '--reads'], /--workers does not combine with --reads/],
    [['--workers', '2', '--baseline-env', 'METRICS=off'], /--workers does not combine with .*--baseline/],
    [['--grown', '2000000,lots'], /--grown must be a number >= 1000, got "lots"/],
    [['--grown', '2000000', '--store', 'postgres'], /--grown runs on SQLite alone/],
    [['--grown', '2000000', '--baseline', '.'], /--grown runs on SQLite alone, without .*--baseline/],
  ];
  for (const [argv, message] of cases) {
    assert.throws(() => readOptions(argv), (error: unknown) => error instanceof UsageError && message.test(error.message), argv.join(' '));
  }
});

test('bench defaults: 3 pairs of 10 s after 3 s, 50 connections, SQLite, no baseline', () => {
  const options = readOptions([]);
  assert.ok(options);
  assert.deepEqual(
    { pairs: options.pairs, duration: options.duration, warmup: options.warmup, connections: options.connections, store: options.store, baseline: options.baseline },
    { pairs: 3, duration: 10, warmup: 3, connections: 50, store: 'sqlite', baseline: null },
  );
});

test('bench --grown: the store sizes, in the order given; none without it', () => {
  assert.deepEqual(readOptions(['--grown', '2000000,10000000'])?.grown, [2_000_000, 10_000_000]);
  assert.deepEqual(readOptions([])?.grown, []);
});
