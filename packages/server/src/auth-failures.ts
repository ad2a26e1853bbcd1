import { AuthLimitedError } from '@trace-ingest/shared/errors';
import type { Metrics } from './metrics.js';

/** The listeners that take a credential. */
export type Listener = 'ingest' | 'console' | 'metrics' | 'grpc';

const WINDOW_MS = 60_000;
/** Addresses tracked at once; past it the oldest windows are dropped (memory stays bounded under a spray of addresses). */
const MAX_ADDRESSES = 50_000;

interface Window {
  start: number;
  failures: number;
}

/**
 * Failed authentications per client address, shared by every listener: a
 * wrong API key, console token or metrics token counts once, on whichever
 * port. Past `limit` failures in a minute the address is refused (429 and
 * Retry-After) until the minute is over, before its credential is looked at,
 * so guessing runs at `limit` a minute, not at the speed of the server.
 * Missing credentials and wrong scopes are not guesses and do not count.
 * Each replica counts its own (a guesser spread over N replicas gets N
 * times the limit, still a few a second).
 */
export class AuthFailures {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly limit: number,
    private readonly metrics: Metrics,
    private readonly now: () => number = Date.now,
  ) {}

  /** Throws AuthLimitedError while `client` is over its limit. */
  check(client: string | undefined, listener: Listener = 'ingest'): void {
    if (client === undefined || this.limit === 0) return;
    const w = this.windows.get(client);
    if (w === undefined) return;
    const left = w.start + WINDOW_MS - this.now();
    if (left <= 0) {
      this.windows.delete(client);
      return;
    }
    if (w.failures >= this.limit) {
      this.metrics.authRefused.inc({ listener });
      throw new AuthLimitedError(left / 1000);
    }
  }

  /** Counts a failed authentication of `client`. */
  fail(client: string | undefined, listener: Listener): void {
    this.metrics.authFailures.inc({ listener });
    if (client === undefined || this.limit === 0) return;
    const now = this.now();
    let w = this.windows.get(client);
    if (w === undefined || now - w.start >= WINDOW_MS) {
      this.windows.delete(client);
      w = { start: now, failures: 0 };
      this.windows.set(client, w);
      this.prune(now);
    }
    w.failures++;
  }

  /** Addresses tracked now (tests). */
  get size(): number {
    return this.windows.size;
  }

  private prune(now: number): void {
    if (this.windows.size <= MAX_ADDRESSES) return;
    for (const [client, w] of this.windows) {
      if (this.windows.size <= MAX_ADDRESSES && now - w.start < WINDOW_MS) break;
      this.windows.delete(client);
    }
  }
}
