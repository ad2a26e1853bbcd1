import { describe, expect, it } from 'vitest';
import { TraceFilter } from './trace-filter.js';

describe('TraceFilter', () => {
  it('finds every trace added or loaded, with the earliest start seen, on the days asked only', () => {
    const f = new TraceFilter(4);
    f.load('2026-11-25', [['org_a', 'old', 100]]);
    f.load('2026-11-26', []);
    for (let i = 0; i < 100_000; i++) f.add('2026-11-26', 'org_a', `t${i}`, 1000 + i);
    f.add('2026-11-26', 'org_a', 't7', 5);
    for (let i = 0; i < 100_000; i += 997) expect(f.since(['2026-11-26'], 'org_a', `t${i}`)).toBe(i === 7 ? 5 : 1000 + i);
    expect(f.since(['2026-11-25', '2026-11-26'], 'org_a', 'old')).toBe(100);
    expect(f.since(['2026-11-26'], 'org_a', 'old')).toBeUndefined();
    // Another org's trace of the same id is another trace.
    expect(f.since(['2026-11-25'], 'org_b', 'old')).toBeUndefined();
    // A day not loaded takes nothing: its load reads the table.
    f.add('2026-11-27', 'org_a', 'x', 1);
    expect(f.has('2026-11-27')).toBe(false);
  });

  it('keeps the last days loaded only', () => {
    const f = new TraceFilter(2);
    for (const d of ['2026-11-24', '2026-11-25', '2026-11-26']) f.load(d, [['o', 't', 1]]);
    expect(['2026-11-24', '2026-11-25', '2026-11-26'].map((d) => f.has(d))).toEqual([false, true, true]);
  });

  it('answers few traces that were never added (fingerprints are 32 bits)', () => {
    const f = new TraceFilter();
    f.load('d', []);
    for (let i = 0; i < 200_000; i++) f.add('d', 'org_a', `stored-${i}`, i);
    let hits = 0;
    for (let i = 0; i < 200_000; i++) if (f.since(['d'], 'org_a', `new-${i}`) !== undefined) hits++;
    expect(hits).toBeLessThan(50);
  });
});
