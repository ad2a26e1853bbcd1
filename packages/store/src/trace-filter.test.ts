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

  it('keeps the days one lookup asks about while it loads the others', () => {
    const f = new TraceFilter(3);
    for (const d of ['2026-11-24', '2026-11-25', '2026-11-26']) f.load(d, [['o', `t-${d}`, 1]]);
    // A lookup of the 24th to the 26th and the 27th: the 24th is the oldest loaded, yet asked about.
    const asked = new Set(['2026-11-24', '2026-11-25', '2026-11-27']);
    f.load('2026-11-27', [], asked);
    expect(f.since([...asked], 'o', 't-2026-11-24')).toBe(1);
    expect(['2026-11-24', '2026-11-25', '2026-11-26', '2026-11-27'].map((d) => f.has(d))).toEqual([true, true, false, true]);
  });

  it('answers no trace that was never added, among as many as a busy day holds', () => {
    // Ids as clients make them (random hex, from a seeded generator): sequential ids hash into patterns that rarely meet.
    let x = 0x2545f491;
    const id = () => {
      let out = '';
      for (let i = 0; i < 2; i++) {
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        out += (x >>> 0).toString(16).padStart(8, '0');
      }
      return out;
    };
    const f = new TraceFilter();
    f.load('d', []);
    const stored = Array.from({ length: 400_000 }, id);
    stored.forEach((t, i) => f.add('d', 'org_a', t, i));
    let hits = 0;
    for (let i = 0; i < 400_000; i++) if (f.since(['d'], 'org_a', id()) !== undefined) hits++;
    expect(hits).toBe(0);
    expect(f.since(['d'], 'org_a', stored[123_456] as string)).toBe(123_456);
  });
});
