/** What the bench reads about a server process from /proc while load runs, and the arithmetic of its figures. */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

/** Kilobytes from /proc/<pid>/status (VmRSS, VmHWM), or undefined once the process is gone. */
export function procStatusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Clock ticks per second of /proc/PID/stat times. */
export const CLOCK_TICKS = (() => {
  const result = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  return Number(result.stdout?.trim()) || 100;
})();

/** User + system CPU seconds of a process (all its threads) so far, or of its thread `tid` alone. */
export function cpuSeconds(pid: number, tid?: number): number {
  try {
    const stat = fs.readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return Number.NaN;
  }
}

/** The machine's CPU time so far, busy and in all, in clock ticks (/proc/stat's first line; idle and iowait are not busy). */
function machineTicks(): { busy: number; all: number } {
  const ticks = (fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const all = ticks.reduce((sum, value) => sum + value, 0);
  return { busy: all - (ticks[3] ?? 0) - (ticks[4] ?? 0), all };
}

/** How often the peak RSS is sampled during a measured run. */
const RSS_PEAK_SAMPLE_EVERY_MS = 200;

export interface ProcessSampling {
  /** Highest VmRSS seen, including once more right after the work. */
  readonly rssPeakKb: number;
  /** VmRSS every `rssSampleEveryMs`, when asked for. */
  readonly rssSamplesKb: number[];
  /** The process's CPU seconds over the window, and the window's wall-clock seconds. */
  readonly cpuSeconds: number;
  /** Of which its main thread's (the thread whose id is the pid). */
  readonly mainThreadCpuSeconds: number;
  readonly elapsedSeconds: number;
  /** Every core's busy CPU seconds over the window (server, load generator, kernel, anything else), and its share of all. */
  readonly machineBusySeconds: number;
  readonly machineBusyShare: number;
}

/**
 * Samples process `pid` while `work` runs: the CPU window opens just before `work` is started and closes when it
 * settles, so it includes the load generator's start-up.
 */
export async function sampleProcessDuring<T>(
  pid: number,
  work: () => Promise<T>,
  rssSampleEveryMs: number,
): Promise<{ readonly result: T; readonly sampling: ProcessSampling }> {
  const cpuBefore = cpuSeconds(pid);
  const mainThreadBefore = cpuSeconds(pid, pid);
  const machineBefore = machineTicks();
  const started = process.hrtime.bigint();
  const running = work();
  let rssPeakKb = 0;
  const rssSamplesKb: number[] = [];
  const peakTimer = setInterval(() => {
    rssPeakKb = Math.max(rssPeakKb, procStatusKb(pid, 'VmRSS') ?? 0);
  }, RSS_PEAK_SAMPLE_EVERY_MS);
  const sampleTimer =
    rssSampleEveryMs > 0 ? setInterval(() => rssSamplesKb.push(procStatusKb(pid, 'VmRSS') ?? 0), rssSampleEveryMs) : undefined;
  const result = await running.finally(() => {
    clearInterval(peakTimer);
    clearInterval(sampleTimer);
  });
  const elapsedSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = cpuSeconds(pid) - cpuBefore;
  const mainThreadCpu = cpuSeconds(pid, pid) - mainThreadBefore;
  const machineAfter = machineTicks();
  const machineBusy = machineAfter.busy - machineBefore.busy;
  rssPeakKb = Math.max(rssPeakKb, procStatusKb(pid, 'VmRSS') ?? 0);
  return {
    result,
    sampling: {
      rssPeakKb,
      rssSamplesKb,
      cpuSeconds: cpu,
      mainThreadCpuSeconds: mainThreadCpu,
      elapsedSeconds,
      machineBusySeconds: machineBusy / CLOCK_TICKS,
      machineBusyShare: machineBusy / Math.max(1, machineAfter.all - machineBefore.all),
    },
  };
}

/** Kilobytes to megabytes (MiB), one decimal. */
export const mb = (kb: number) => Math.round(kb / 102.4) / 10;

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** `value` rounded to `places` decimal places. */
export const round = (value: number, places = 1): number => Math.round(value * 10 ** places) / 10 ** places;

/** The `p`th percentile of `sorted` (ascending), nearest rank; NaN when there is no sample. */
export const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

/** Rounded to three decimals, as every ratio is reported. */
export const ratio3 = (value: number) => Math.round(value * 1000) / 1000;

/** Largest deviation of any sample from their mean, as a percentage of the mean. */
export function flatness(samples: number[]): number {
  if (samples.length === 0) return 0;
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return Math.round((Math.max(...samples.map((s) => Math.abs(s - mean))) / mean) * 1000) / 10;
}
