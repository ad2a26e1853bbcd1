import { DuckDBInstance } from '@duckdb/node-api';
import { beforeAll, describe, expect, it } from 'vitest';
import { fingerprintSql, TraceFilter, type Fingerprint } from './trace-filter.js';

// Fingerprints as the store computes them: by DuckDB, from the values where they are stored.
let fpColumns: (sql: string) => Promise<{ lo: number[]; hi: number[] }>;
beforeAll(async () => {
  const instance = await DuckDBInstance.create(':memory:');
  const c = await instance.connect();
  fpColumns = async (from) => {
    const cols = (await c.runAndReadAll(`SELECT ${fingerprintSql('org', 'id')} FROM ${from}`)).getColumnsObjectJS();
    return { lo: (cols.fp_lo ?? []).map(Number), hi: (cols.fp_hi ?? []).map(Number) };
  };
  return () => {
    c.closeSync();
    instance.closeSync();
  };
});

const fp = async (org: string, id: string): Promise<Fingerprint> => {
  const { lo, hi } = await fpColumns(`(SELECT '${org}' AS org, '${id}' AS id)`);
  return { lo: lo[0] ?? 0, hi: hi[0] ?? 0 };
};

describe('TraceFilter', () => {
  it('finds every trace added or loaded, with the earliest start seen, on the days asked only', async () => {
    const f = new TraceFilter(4);
    const old = await fp('org_a', 'old');
    f.load('2026-11-25', { lo: [old.lo], hi: [old.hi], start: [100] });
    f.load('2026-11-26', { lo: [], hi: [] });
    const many = await fpColumns("(SELECT 'org_a' AS org, 't' || range AS id FROM range(100000))");
    for (let i = 0; i < 100_000; i++) f.add('2026-11-26', { lo: many.lo[i] ?? 0, hi: many.hi[i] ?? 0 }, 1000 + i);
    f.add('2026-11-26', await fp('org_a', 't7'), 5);
    for (let i = 0; i < 100_000; i += 997) expect(f.since(['2026-11-26'], await fp('org_a', `t${i}`))).toBe(i === 7 ? 5 : 1000 + i);
    expect(f.since(['2026-11-25', '2026-11-26'], old)).toBe(100);
    expect(f.since(['2026-11-26'], old)).toBeUndefined();
    // Another org's trace of the same id is another trace.
    expect(f.since(['2026-11-25'], await fp('org_b', 'old'))).toBeUndefined();
    // A day not loaded takes nothing: its load reads the table.
    f.add('2026-11-27', await fp('org_a', 'x'), 1);
    expect(f.has('2026-11-27')).toBe(false);
  });

  it('keeps the last days loaded only', () => {
    const f = new TraceFilter(2);
    for (const d of ['2026-11-24', '2026-11-25', '2026-11-26']) f.load(d, { lo: [1], hi: [2], start: [1] });
    expect(['2026-11-24', '2026-11-25', '2026-11-26'].map((d) => f.has(d))).toEqual([false, true, true]);
  });

  it('keeps the days one lookup asks about while it loads the others', () => {
    const f = new TraceFilter(3);
    const days = ['2026-11-24', '2026-11-25', '2026-11-26'];
    days.forEach((d, i) => f.load(d, { lo: [i + 10], hi: [i], start: [1] }));
    // A lookup of the 24th to the 26th and the 27th: the 24th is the oldest loaded, yet asked about.
    const asked = new Set(['2026-11-24', '2026-11-25', '2026-11-27']);
    f.load('2026-11-27', { lo: [], hi: [] }, asked);
    expect(f.since([...asked], { lo: 10, hi: 0 })).toBe(1);
    expect([...days, '2026-11-27'].map((d) => f.has(d))).toEqual([true, true, false, true]);
  });

  it('stands a fingerprint whose low half is 0 for 1, the empty slot', () => {
    const f = new TraceFilter();
    f.load('d', { lo: [0], hi: [7], start: [3] });
    expect(f.since(['d'], { lo: 0, hi: 7 })).toBe(3);
    expect(f.since(['d'], { lo: 0, hi: 8 })).toBeUndefined();
  });

  it('answers no trace that was never added, among as many as a busy day holds', async () => {
    // Ids as clients make them (random hex): sequential ids hash into patterns that rarely meet.
    const f = new TraceFilter();
    const stored = await fpColumns("(SELECT 'org_a' AS org, md5('stored' || range) AS id FROM range(400000))");
    f.load('d', { ...stored, start: stored.lo.map((_, i) => i) });
    const other = await fpColumns("(SELECT 'org_a' AS org, md5('other' || range) AS id FROM range(400000))");
    let hits = 0;
    for (let i = 0; i < 400_000; i++) if (f.since(['d'], { lo: other.lo[i] ?? 0, hi: other.hi[i] ?? 0 }) !== undefined) hits++;
    expect(hits).toBe(0);
    expect(f.since(['d'], { lo: stored.lo[123_456] ?? 0, hi: stored.hi[123_456] ?? 0 })).toBe(123_456);
  });
});
