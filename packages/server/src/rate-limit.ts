import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
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

/** In-process limits: right for one replica (the embedded default). */
export class MemoryRateLimiter extends PerRateLimiter {
  protected create(rps: number): RateLimiterAbstract {
    return new RateLimiterMemory({ points: rps, duration: 1, keyPrefix: `rps${rps}` });
  }
}
