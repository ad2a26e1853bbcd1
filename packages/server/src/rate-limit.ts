import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RateLimitedError } from '@trace-ingest/shared/errors';

/**
 * Per-key requests-per-second limits. The limit comes from the org's plan at
 * each request, so a plan change applies at once: one limiter per distinct
 * rate, keyed by key id.
 */
export interface RateLimiter {
  /** Takes one request from the key's budget; throws RateLimitedError when it is spent. */
  consume(keyId: string, rps: number): Promise<void>;
  close(): Promise<void>;
}

export abstract class PerRateLimiter implements RateLimiter {
  private readonly byRate = new Map<number, RateLimiterAbstract>();

  protected abstract create(rps: number): RateLimiterAbstract;

  async consume(keyId: string, rps: number): Promise<void> {
    let limiter = this.byRate.get(rps);
    if (limiter === undefined) {
      limiter = this.create(rps);
      this.byRate.set(rps, limiter);
    }
    try {
      await limiter.consume(keyId, 1);
    } catch (e) {
      if (e instanceof RateLimiterRes) throw new RateLimitedError(e.msBeforeNext / 1000, rps);
      throw e;
    }
  }

  close(): Promise<void> {
    this.byRate.clear();
    return Promise.resolve();
  }
}

/** One key's fixed window: when it opened on the monotonic clock, and the requests taken in it. */
interface Window {
  openedAt: number;
  taken: number;
}

const WINDOW_MS = 1000;

/**
 * In-process limits: right for one replica (the embedded default). One fixed
 * 1-second window per key, timed on the monotonic clock (`performance.now`),
 * never the wall clock: a clock stepped back cannot stretch a window (a
 * Retry-After of an hour), nor one stepped forward reset it.
 */
export class MemoryRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, Window>();
  private sweptAt: number;

  constructor(private readonly now: () => number = () => performance.now()) {
    this.sweptAt = now();
  }

  consume(keyId: string, rps: number): Promise<void> {
    const now = this.now();
    this.sweep(now);
    // Keyed by rate too, so a plan change starts a fresh window as a limiter per rate did.
    const id = `${rps}\u0000${keyId}`;
    let w = this.windows.get(id);
    if (w === undefined || now - w.openedAt >= WINDOW_MS) {
      w = { openedAt: now, taken: 0 };
      this.windows.set(id, w);
    }
    w.taken++;
    if (w.taken > rps) return Promise.reject(new RateLimitedError(Math.min(WINDOW_MS, w.openedAt + WINDOW_MS - now) / 1000, rps));
    return Promise.resolve();
  }

  /** Drops windows that have closed, at most once a window, so the map holds only keys seen in the last second or two. */
  private sweep(now: number): void {
    if (now - this.sweptAt < WINDOW_MS) return;
    this.sweptAt = now;
    for (const [id, w] of this.windows) if (now - w.openedAt >= WINDOW_MS) this.windows.delete(id);
  }

  close(): Promise<void> {
    this.windows.clear();
    return Promise.resolve();
  }
}
