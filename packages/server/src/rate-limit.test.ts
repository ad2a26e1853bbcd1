import { describe, expect, it } from 'vitest';
import { RateLimitedError } from '@trace-ingest/shared/errors';
import { MemoryRateLimiter } from './rate-limit.js';

describe('MemoryRateLimiter', () => {
  it('opens a window per key on the monotonic clock and never asks for more than the window', async () => {
    let now = 1000;
    const limiter = new MemoryRateLimiter(() => now);
    await limiter.consume('k', 2);
    await limiter.consume('k', 2);
    now += 250;
    const refused = await limiter.consume('k', 2).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RateLimitedError);
    expect((refused as RateLimitedError).retryAfterSeconds).toBe(1);
    // Another key has a window of its own.
    await limiter.consume('other', 2);
    now += 750;
    await limiter.consume('k', 2);
  });
});
