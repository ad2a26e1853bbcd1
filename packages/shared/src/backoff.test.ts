import { describe, expect, it } from 'vitest';
import { backoffMs } from './backoff.js';

describe('backoffMs', () => {
  it('doubles from the minimum up to the maximum, half of it jitter', () => {
    const b = { minMs: 100, maxMs: 1000 };
    expect([0, 1, 2, 3, 4, 50].map((a) => backoffMs(a, b, () => 0))).toEqual([50, 100, 200, 400, 500, 500]);
    expect([0, 1, 2, 3, 4, 50].map((a) => backoffMs(a, b, () => 0.999999))).toEqual([100, 200, 400, 800, 1000, 1000]);
  });
});
