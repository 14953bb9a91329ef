/**
 * `--soak S`: the creates scenario (./creates.ts) as one pair of S-second runs, plantstore's RSS sampled every 5 s,
 * to show whether memory stays flat under sustained load. What makes it a soak is here: the sampling interval, the
 * flatness figures and their report line.
 */
import { flatness } from '../metrics.js';

export const SOAK_RSS_SAMPLE_EVERY_MS = 5000;
/** Samples left out of the second flatness figure: the first 15 s. */
const WARMING_SAMPLES = 15_000 / SOAK_RSS_SAMPLE_EVERY_MS;

/** The part of the results file's name that says which soak, e.g. soak60. */
export const soakLabel = (seconds: number) => `soak${seconds}`;

export interface SoakSummary {
  readonly soakRssSamplesMb: number[];
  readonly soakRssFlatnessPercent: number | null;
  /** The same without the first 15 s, while the heap and SQLite's page cache fill up. */
  readonly soakRssFlatnessAfter15sPercent: number | null;
}

/** plantstore's RSS samples (none outside a soak) and how flat they are. */
export function soakSummary(samplesMb: number[]): SoakSummary {
  return {
    soakRssSamplesMb: samplesMb,
    soakRssFlatnessPercent: samplesMb.length ? flatness(samplesMb) : null,
    soakRssFlatnessAfter15sPercent: samplesMb.length > WARMING_SAMPLES ? flatness(samplesMb.slice(WARMING_SAMPLES)) : null,
  };
}

/** The soak's figure, first among a soak's lines: its bold opens the line (BENCHMARKS.md's headline). */
export function soakLines(summary: SoakSummary): string[] {
  if (summary.soakRssSamplesMb.length === 0) return [];
  return [
    `**Soak: RSS after the first 15 s within ±${summary.soakRssFlatnessAfter15sPercent ?? 'n/a'}% of its mean** · every sample within ±${summary.soakRssFlatnessPercent}%; ` +
      `samples every ${SOAK_RSS_SAMPLE_EVERY_MS / 1000} s (MB): ${summary.soakRssSamplesMb.join(', ')}`,
  ];
}
