/** What a client process (test/clients/) reports of its creates: counted by status and error, and timed. */
export interface ClientSummary {
  readonly sent: number;
  /** Answers with a 2xx status. */
  readonly ok: number;
  /** Status → count, for answers other than 2xx. */
  readonly statuses: Record<string, number>;
  /** Transport errors (no answer): the error's code → count. */
  readonly errors: Record<string, number>;
  readonly elapsedMs: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export type Outcome = { readonly status: number; readonly ms: number } | { readonly error: string; readonly ms: number };

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

export function summarize(outcomes: readonly Outcome[], elapsedMs: number): ClientSummary {
  const statuses: Record<string, number> = {};
  const errors: Record<string, number> = {};
  let ok = 0;
  for (const outcome of outcomes) {
    if ('error' in outcome) errors[outcome.error] = (errors[outcome.error] ?? 0) + 1;
    else if (outcome.status >= 200 && outcome.status < 300) ok += 1;
    else statuses[outcome.status] = (statuses[outcome.status] ?? 0) + 1;
  }
  const times = outcomes.map((outcome) => outcome.ms).sort((a, b) => a - b);
  return { sent: outcomes.length, ok, statuses, errors, elapsedMs, p50Ms: quantile(times, 0.5), p99Ms: quantile(times, 0.99), maxMs: times.at(-1) ?? 0 };
}
