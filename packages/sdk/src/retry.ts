/**
 * What to do with one answer of `POST /ingest` (the contract's handling rules,
 * section 7, and the README's "Errors and how a client should react").
 */

export interface RetryOptions {
  /** First backoff delay; each retry doubles it up to maxDelayMs. */
  initialDelayMs: number;
  maxDelayMs: number;
  /** A batch is given up this long after its first attempt (then reported to onError). */
  maxElapsedMs: number;
}

export const DEFAULT_RETRY: RetryOptions = { initialDelayMs: 250, maxDelayMs: 10_000, maxElapsedMs: 60_000 };

export type Verdict =
  | { kind: 'sent' }
  /** `afterMs`: the server's Retry-After, when it gave one; else back off. */
  | { kind: 'retry'; afterMs?: number }
  | { kind: 'final' };

/** Retry-After as integer seconds or an HTTP date, in ms; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * 2xx sent; 429 with Retry-After (rate limit) and 503 wait and retry; 500
 * and other 5xx retry with backoff (nothing was accepted); a 429 without
 * Retry-After is the monthly quota, final like every other 4xx (400, 401,
 * 404, 413): retrying cannot succeed.
 */
export function classify(status: number, retryAfter: string | null): Verdict {
  if (status >= 200 && status < 300) return { kind: 'sent' };
  const afterMs = parseRetryAfter(retryAfter);
  if (status === 429) return afterMs === undefined ? { kind: 'final' } : { kind: 'retry', afterMs };
  if (status >= 500) return afterMs === undefined ? { kind: 'retry' } : { kind: 'retry', afterMs };
  return { kind: 'final' };
}

/**
 * Exponential backoff with "equal jitter": half the delay fixed, half random,
 * so clients that failed together do not come back together.
 */
export function backoffMs(attempt: number, opts: Pick<RetryOptions, 'initialDelayMs' | 'maxDelayMs'>, random: () => number = Math.random): number {
  const base = Math.min(opts.maxDelayMs, opts.initialDelayMs * 2 ** Math.min(attempt, 30));
  return Math.round(base / 2 + random() * (base / 2));
}

/**
 * The wait before the next attempt, or undefined when it would end after the
 * deadline (the batch is then given up).
 */
export function nextDelay(
  verdict: { afterMs?: number },
  attempt: number,
  opts: RetryOptions,
  elapsedMs: number,
  random: () => number = Math.random,
): number | undefined {
  const wait = verdict.afterMs ?? backoffMs(attempt, opts, random);
  return elapsedMs + wait > opts.maxElapsedMs ? undefined : wait;
}
