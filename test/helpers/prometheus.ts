/**
 * A strict reader of the Prometheus text exposition format 0.0.4, for tests (prom-client writes it, but reads none).
 * It throws, naming the line, on anything a Prometheus server would refuse or that the format forbids: a malformed
 * name, label or value, a sample before its family's TYPE, a family's lines not together, a repeated series, a
 * histogram whose buckets are not cumulative or whose +Inf bucket is not its count, no final newline.
 */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  readonly type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  readonly help: string | undefined;
  readonly samples: Sample[];
}

export interface Exposition {
  readonly families: ReadonlyMap<string, Family>;
  /** The value of the one sample with exactly these labels; undefined when there is none. */
  value(name: string, labels?: Readonly<Record<string, string>>): number | undefined;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function parseValue(text: string, where: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  // The format spells it NaN; prom-client writes Nan (an event-loop mean with no samples yet), which Prometheus reads
  // (Go's ParseFloat takes NaN in any case).
  if (/^nan$/i.test(text)) return NaN;
  if (!NUMBER.test(text)) throw new Error(`${where}: ${JSON.stringify(text)} is not a sample value`);
  return Number(text);
}

/** The family a sample name belongs to: a histogram's _bucket/_sum/_count and a summary's _sum/_count are its own. */
function familyOf(name: string, families: ReadonlyMap<string, Family>): Family | undefined {
  const own = families.get(name);
  if (own) return own;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const family = families.get(name.slice(0, -suffix.length));
    if (family && (family.type === 'histogram' || (family.type === 'summary' && suffix !== '_bucket'))) return family;
  }
  return undefined;
}

/** `{a="x",b="y\"z"}` from position `start` (at the `{`): the labels and the position after the `}`. */
function parseLabels(line: string, start: number, where: string): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let at = start + 1;
  while (line[at] !== '}') {
    const equals = line.indexOf('=', at);
    if (equals < 0) throw new Error(`${where}: a label without "="`);
    const name = line.slice(at, equals);
    if (!LABEL_NAME.test(name)) throw new Error(`${where}: ${JSON.stringify(name)} is not a label name`);
    if (name in labels) throw new Error(`${where}: label ${name} given twice`);
    if (line[equals + 1] !== '"') throw new Error(`${where}: the value of label ${name} is not quoted`);
    let value = '';
    at = equals + 2;
    for (;;) {
      const char = line[at];
      if (char === undefined) throw new Error(`${where}: the value of label ${name} is not closed`);
      if (char === '"') break;
      if (char === '\\') {
        const escaped = line[at + 1];
        if (escaped === '\\' || escaped === '"') value += escaped;
        else if (escaped === 'n') value += '\n';
        else throw new Error(`${where}: label ${name} has an unknown escape \\${escaped ?? ''}`);
        at += 2;
      } else {
        value += char;
        at += 1;
      }
    }
    labels[name] = value;
    at += 1;
    if (line[at] === ',') at += 1;
    else if (line[at] !== '}') throw new Error(`${where}: labels must be separated by ","`);
  }
  return { labels, end: at + 1 };
}

export function parsePrometheusText(text: string): Exposition {
  if (!text.endsWith('\n')) throw new Error('the exposition does not end with a newline');
  const families = new Map<string, Family>();
  const seriesSeen = new Set<string>();
  let current: Family | undefined;
  const lines = text.slice(0, -1).split('\n');
  lines.forEach((line, index) => {
    const where = `line ${index + 1} (${JSON.stringify(line.slice(0, 80))})`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const match = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!match) return; // A plain comment.
      const [, keyword, name = '', rest = ''] = match;
      if (!METRIC_NAME.test(name)) throw new Error(`${where}: ${JSON.stringify(name)} is not a metric name`);
      let family = families.get(name);
      if (family && family !== current) throw new Error(`${where}: the lines of ${name} are not together`);
      if (keyword === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`${where}: ${JSON.stringify(rest)} is not a metric type`);
        if (family?.samples.length) throw new Error(`${where}: TYPE after samples of ${name}`);
        if (family && family.type !== 'untyped') throw new Error(`${where}: ${name} typed twice`);
        family = { name, type: rest as Family['type'], help: family?.help, samples: family?.samples ?? [] };
      } else {
        if (family?.help !== undefined) throw new Error(`${where}: ${name} has two HELP lines`);
        if (/\\[^\\n]/.test(rest.replaceAll('\\\\', ''))) throw new Error(`${where}: HELP has an unknown escape`);
        family = { name, type: family?.type ?? 'untyped', help: rest, samples: family?.samples ?? [] };
      }
      families.set(name, family);
      current = family;
      return;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) throw new Error(`${where}: not a sample`);
    const name = line.slice(0, nameEnd);
    if (!METRIC_NAME.test(name)) throw new Error(`${where}: ${JSON.stringify(name)} is not a metric name`);
    let labels: Record<string, string> = {};
    let at = nameEnd;
    if (line[at] === '{') ({ labels, end: at } = parseLabels(line, at, where));
    if (line[at] !== ' ') throw new Error(`${where}: no space before the value`);
    const [valueText = '', timestamp, extra] = line.slice(at + 1).split(' ');
    if (extra !== undefined || (timestamp !== undefined && !/^-?\d+$/.test(timestamp))) throw new Error(`${where}: trailing text`);
    const value = parseValue(valueText, where);
    const family = familyOf(name, families);
    if (!family) throw new Error(`${where}: a sample of ${name} before its TYPE`);
    if (family !== current) throw new Error(`${where}: the lines of ${family.name} are not together`);
    const series = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seriesSeen.has(series)) throw new Error(`${where}: the series is given twice`);
    seriesSeen.add(series);
    if (family.type === 'histogram' && name.endsWith('_bucket') && labels.le === undefined) throw new Error(`${where}: a bucket without le`);
    family.samples.push({ name, labels, value });
  });
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family);
  return {
    families,
    value(name, labels = {}) {
      const family = familyOf(name, families);
      const wanted = JSON.stringify(Object.entries(labels).sort());
      return family?.samples.find((sample) => sample.name === name && JSON.stringify(Object.entries(sample.labels).sort()) === wanted)?.value;
    },
  };
}

/** Per series: buckets in increasing `le`, counts never decreasing, the +Inf bucket equal to _count. */
function checkHistogram(family: Family): void {
  const bySeries = new Map<string, { buckets: Array<[number, number]>; count?: number }>();
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const series = bySeries.get(key) ?? { buckets: [] };
    bySeries.set(key, series);
    if (sample.name === `${family.name}_bucket`) series.buckets.push([parseValue(le ?? '', family.name), sample.value]);
    else if (sample.name === `${family.name}_count`) series.count = sample.value;
  }
  for (const [key, { buckets, count }] of bySeries) {
    const where = `${family.name}${key}`;
    if (buckets.at(-1)?.[0] !== Infinity) throw new Error(`${where}: no +Inf bucket`);
    buckets.forEach(([le, value], index) => {
      const previous = buckets[index - 1];
      if (previous && !(le > previous[0] && value >= previous[1])) throw new Error(`${where}: buckets not cumulative at le=${le}`);
    });
    if (buckets.at(-1)?.[1] !== count) throw new Error(`${where}: the +Inf bucket is not _count`);
  }
}
