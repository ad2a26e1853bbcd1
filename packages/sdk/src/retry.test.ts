import { describe, expect, it } from 'vitest';
import { backoffMs, classify, nextDelay, parseRetryAfter } from './retry.js';
import { backoffMs as sharedBackoffMs } from '@trace-ingest/shared/backoff';

describe('classify', () => {
  it('follows the contract: rate-limit 429 and 503 retry, quota 429 and other 4xx are final', () => {
    expect(classify(202, null)).toEqual({ kind: 'sent' });
    expect(classify(429, '2')).toEqual({ kind: 'retry', afterMs: 2000 });
    expect(classify(429, null)).toEqual({ kind: 'final' });
    expect(classify(503, '1')).toEqual({ kind: 'retry', afterMs: 1000 });
    expect(classify(503, null)).toEqual({ kind: 'retry' });
    expect(classify(500, null)).toEqual({ kind: 'retry' });
    for (const s of [400, 401, 404, 405, 413]) expect(classify(s, null)).toEqual({ kind: 'final' });
    expect(classify(413, '5')).toEqual({ kind: 'final' });
  });
});

describe('parseRetryAfter', () => {
  it('reads seconds and HTTP dates', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(' 0 ')).toBe(0);
    const now = Date.UTC(2026, 0, 1, 0, 0, 0);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Thu, 01 Jan 2025 00:00:05 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter('')).toBeUndefined();
  });
});

describe('backoff', () => {
  const opts = { initialDelayMs: 100, maxDelayMs: 1000, maxElapsedMs: 5000 };

  it('doubles from the initial delay up to the cap, with half of it jittered', () => {
    expect([0, 1, 2, 3, 4, 10].map((a) => backoffMs(a, opts, () => 0))).toEqual([50, 100, 200, 400, 500, 500]);
    expect([0, 1, 2, 3, 4, 10].map((a) => backoffMs(a, opts, () => 1))).toEqual([100, 200, 400, 800, 1000, 1000]);
    for (let i = 0; i < 100; i++) {
      const d = backoffMs(3, opts);
      expect(d).toBeGreaterThanOrEqual(400);
      expect(d).toBeLessThanOrEqual(800);
    }
  });

  it('stops at the deadline, Retry-After included', () => {
    expect(nextDelay({}, 0, opts, 0, () => 1)).toBe(100);
    expect(nextDelay({}, 10, opts, 4500, () => 1)).toBeUndefined();
    expect(nextDelay({ afterMs: 1000 }, 0, opts, 3000)).toBe(1000);
    expect(nextDelay({ afterMs: 3000 }, 0, opts, 3000)).toBeUndefined();
  });
});

describe('the backoff schedule', () => {
  it('is the service-wide one of @trace-ingest/shared/backoff (the SDK keeps a copy to stay free of runtime dependencies)', () => {
    for (const random of [0, 0.25, 0.5, 0.999]) {
      for (let attempt = 0; attempt < 40; attempt++) {
        const opts = { initialDelayMs: 200, maxDelayMs: 30_000 };
        expect(backoffMs(attempt, opts, () => random)).toBe(sharedBackoffMs(attempt, { minMs: 200, maxMs: 30_000 }, () => random));
      }
    }
  });
});
