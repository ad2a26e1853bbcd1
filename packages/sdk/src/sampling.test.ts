import { describe, expect, it } from 'vitest';
import { ChunkSampler, StreamTimer, evenIndices } from './sampling.js';

describe('evenIndices', () => {
  it('keeps everything up to the limit, then spreads evenly with both ends', () => {
    expect(evenIndices(3, 5)).toEqual([0, 1, 2]);
    expect(evenIndices(11, 3)).toEqual([0, 5, 10]);
    const idx = evenIndices(10_000);
    expect(idx).toHaveLength(200);
    expect(idx[0]).toBe(0);
    expect(idx[199]).toBe(9999);
    const gaps = idx.slice(1).map((v, i) => v - (idx[i] as number));
    expect(Math.max(...gaps) - Math.min(...gaps)).toBeLessThanOrEqual(1);
  });
});

describe('ChunkSampler', () => {
  it('holds at most 200 evenly spread samples of any stream, the last always', () => {
    for (const n of [1, 150, 200, 201, 399, 400, 401, 1000, 12_345, 100_000]) {
      const s = new ChunkSampler();
      for (let i = 0; i < n; i++) s.add(i, i + 1);
      const r = s.result();
      expect(r?.offsets.length).toBe(Math.min(n, 200));
      expect(r?.offsets[0]).toBe(0);
      expect(r?.offsets.at(-1)).toBe(n - 1);
      expect(r?.tokens.at(-1)).toBe(n);
      const o = r?.offsets ?? [];
      for (let i = 1; i < o.length; i++) expect(o[i]).toBeGreaterThan(o[i - 1] as number);
      if (n > 400) {
        const gaps = o.slice(1).map((v, i) => v - (o[i] as number));
        // Evenly thinned: no gap more than about twice the mean.
        expect(Math.max(...gaps)).toBeLessThanOrEqual((3 * n) / 200);
      }
    }
  });

  it('scales the cumulative counts to the provider total, staying monotonic', () => {
    const s = new ChunkSampler();
    for (let i = 1; i <= 10; i++) s.add(i * 10, i);
    expect(s.result(30)?.tokens).toEqual([3, 6, 9, 12, 15, 18, 21, 24, 27, 30]);
    expect(s.result()?.tokens).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(new ChunkSampler().result(5)).toBeUndefined();
  });
});

describe('StreamTimer', () => {
  it('records ttft, output and reasoning curves and the time inside reasoning', () => {
    let now = 1000;
    const t = new StreamTimer(1000, () => now);
    now = 1120;
    t.reasoning();
    now = 1200;
    t.reasoning();
    now = 1500;
    t.output(2);
    now = 1600;
    t.output(2);
    const f = t.fields({ outputTokens: 8, reasoningTokens: 20 });
    expect(f).toEqual({
      ttftMs: 120,
      chunkOffsets: [500, 600],
      chunkTokens: [4, 8],
      reasoningOffsets: [120, 200],
      reasoningChunkTokens: [10, 20],
      reasoningDurationMs: 380,
    });
  });

  it('gives nothing for a stream without chunks', () => {
    expect(new StreamTimer(0, () => 5).fields()).toEqual({});
  });
});
