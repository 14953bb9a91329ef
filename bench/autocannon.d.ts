// The few parts of autocannon (which ships no types) that bench/load.ts uses.
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  interface Request {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    [key: string]: unknown;
  }

  interface Options {
    url: string;
    connections?: number;
    pipelining?: number;
    duration?: number;
    amount?: number;
    timeout?: number;
    method?: string;
    headers?: Record<string, string>;
    requests?: Array<Request & { setupRequest?: (request: Request, context: Record<string, unknown>) => Request }>;
  }

  interface Histogram {
    average: number;
    p50: number;
    p99: number;
    max: number;
    [key: string]: number;
  }

  interface Result {
    requests: Histogram & { total: number };
    latency: Histogram;
    throughput: Histogram;
    errors: number;
    timeouts: number;
    mismatches: number;
    non2xx: number;
    resets: number;
    duration: number;
    start: Date;
    finish: Date;
    '1xx': number;
    '2xx': number;
    '3xx': number;
    '4xx': number;
    '5xx': number;
    statusCodeStats: Record<string, { count: number }>;
  }

  type Instance = EventEmitter & Promise<Result> & { stop(): void };

  function autocannon(options: Options): Instance;
  export default autocannon;
}
