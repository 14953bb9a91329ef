import { Histogram, type Registry } from 'prom-client';

export type DurationLabel = 'method' | 'route' | 'status_code';

/** One label set's counts: per bucket (not cumulative), their sum and their count, in plain numbers. */
export class DurationCell {
  readonly buckets: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<DurationLabel, string>>,
    readonly bounds: readonly number[],
  ) {
    this.buckets = new Float64Array(bounds.length);
  }

  /** As prom-client counts: in the first bucket whose bound is at least `seconds`, or in +Inf only. */
  observe(seconds: number): void {
    const { bounds } = this;
    let index = 0;
    while (index < bounds.length && seconds > (bounds[index] as number)) index += 1;
    if (index < bounds.length) this.buckets[index] = (this.buckets[index] as number) + 1;
    this.sum += seconds;
    this.count += 1;
  }
}

interface ExportedValue {
  readonly labels: Record<string, string | number>;
  readonly sharedLabels: Readonly<Record<DurationLabel, string>>;
  readonly value: number;
  readonly metricName: string;
  readonly exemplar: null | undefined;
}

/**
 * prom-client's Histogram, its observations kept in DurationCells the caller holds (one per label set, made at its
 * first observation and kept) instead of in prom-client's own map: prom-client checks and hashes the label set of
 * every observation, even through a child of `labels()`, and an observation here is a loop over the bounds and three
 * additions. When scraped it exports the cells exactly as prom-client exports its own (the same lines, the same
 * JSON for an instance's workers to sum).
 */
export class CellHistogram extends Histogram<DurationLabel> {
  readonly #name: string;
  readonly #help: string;
  readonly #bounds: readonly number[];
  readonly #cells: DurationCell[] = [];

  constructor(options: { readonly name: string; readonly help: string; readonly buckets: readonly number[]; readonly registers: Registry[] }) {
    super({ name: options.name, help: options.help, labelNames: ['method', 'route', 'status_code'], buckets: [...options.buckets], registers: options.registers });
    this.#name = options.name;
    this.#help = options.help;
    this.#bounds = [...options.buckets];
  }

  /** A new label set's cell, exported from now on; the caller keeps it and observes through it. */
  cell(labels: Readonly<Record<DurationLabel, string>>): DurationCell {
    const cell = new DurationCell(labels, this.#bounds);
    this.#cells.push(cell);
    return cell;
  }

  /** What prom-client's Registry renders (and, label sets spread into each value, what `get()` returns). */
  getForPromString(): Promise<{ name: string; help: string; type: 'histogram'; values: ExportedValue[]; aggregator: 'sum' }> {
    const bucketName = `${this.#name}_bucket`;
    const values: ExportedValue[] = [];
    for (const cell of this.#cells) {
      const sharedLabels = cell.labels;
      let cumulative = 0;
      this.#bounds.forEach((bound, index) => {
        cumulative += cell.buckets[index] as number;
        values.push({ labels: { le: bound }, sharedLabels, value: cumulative, metricName: bucketName, exemplar: null });
      });
      values.push({ labels: { le: '+Inf' }, sharedLabels, value: cell.count, metricName: bucketName, exemplar: null });
      values.push({ labels: {}, sharedLabels, value: cell.sum, metricName: `${this.#name}_sum`, exemplar: undefined });
      values.push({ labels: {}, sharedLabels, value: cell.count, metricName: `${this.#name}_count`, exemplar: undefined });
    }
    return Promise.resolve({ name: this.#name, help: this.#help, type: 'histogram', values, aggregator: 'sum' });
  }
}
