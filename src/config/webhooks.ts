/** The webhook section of the configuration (WEBHOOK_*), read by loadConfig (./config.ts). */
import { ConfigError, boolean, duration, integer, parseDuration, read, MAX_DURATION_MS, type Env } from './variables.js';

export interface WebhookConfig {
  /** Delay after each failed attempt, in milliseconds; one attempt more than there are delays. */
  readonly retrySchedule: readonly number[];
  /** One attempt, from connecting to the end of the answer. */
  readonly timeoutMs: number;
  /** Off by default: a subscription may then reach only public addresses (checked on the address connected to). */
  readonly allowPrivateNetworks: boolean;
  /** Delivered events and their attempts are deleted after this long. */
  readonly retentionMs: number;
  /** Attempts in flight at once, over all subscriptions of this instance. */
  readonly maxInFlight: number;
  /** Attempts in flight at once to one subscription, per instance. */
  readonly maxInFlightPerSubscription: number;
  /** After `webhook rotate-secret`, how long the previous secret also signs. */
  readonly secretGraceMs: number;
}

/** Standard Webhooks' schedule, with 10 h steps until about three days have passed. */
const DEFAULT_WEBHOOK_RETRY_SCHEDULE = '5s,5m,30m,2h,5h,10h,10h,10h,10h,10h,10h';

function retrySchedule(env: Env): number[] {
  const raw = read(env, 'WEBHOOK_RETRY_SCHEDULE')?.trim() || DEFAULT_WEBHOOK_RETRY_SCHEDULE;
  const steps = raw.split(',').map((step) => step.trim());
  if (steps.length > 100) throw new ConfigError('WEBHOOK_RETRY_SCHEDULE', `has ${steps.length} delays; at most 100`);
  return steps.map((step) => {
    const value = parseDuration(step);
    if (value === undefined || value < 1 || value > MAX_DURATION_MS) {
      throw new ConfigError('WEBHOOK_RETRY_SCHEDULE', `must be comma-separated durations such as 5s,5m,30m,2h; ${JSON.stringify(step)} is not one`);
    }
    return value;
  });
}

export function webhooks(env: Env): WebhookConfig {
  return {
    retrySchedule: retrySchedule(env),
    timeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 1, 600_000),
    allowPrivateNetworks: boolean(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
    retentionMs: duration(env, 'WEBHOOK_RETENTION', '7d', 0),
    maxInFlight: integer(env, 'WEBHOOK_MAX_IN_FLIGHT', 64, 1, 10_000),
    maxInFlightPerSubscription: integer(env, 'WEBHOOK_MAX_IN_FLIGHT_PER_SUBSCRIPTION', 16, 1, 10_000),
    secretGraceMs: duration(env, 'WEBHOOK_SECRET_GRACE', '24h', 0),
  };
}
