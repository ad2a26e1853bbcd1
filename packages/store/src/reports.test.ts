import { describe, expect, it } from 'vitest';
import {
  chooseRoute,
  COUNT_ROUTES,
  DAILY_COST_ROUTES,
  LABEL_ROUTES,
  USAGE_ROUTES,
  type RangeRoute,
  type ReportInputs,
  type ReportRoute,
  type UsageRow,
} from './reports.js';

const WHOLE: RangeRoute = { days: { from: '2026-11-01', to: '2026-11-26' }, edges: [], less: [] };
const CUT: RangeRoute = { days: { from: '2026-11-01', to: '2026-11-26' }, edges: [{ from: 1_795_651_200_000, to: 1_795_707_730_000 }], less: [] };
/** Whole days less the part of the last one after the range's end (spans started after now). */
const LESS: RangeRoute = { days: { from: '2026-11-01', to: '2026-11-27' }, edges: [], less: [{ from: 1_795_707_730_001, to: 1_795_737_600_000 }] };

/** A group of the slice taken away. */
const takenRow = (group: string): UsageRow => ({ group, spans: 1, unpricedSpans: 0, tokens: {} as UsageRow['tokens'], costs: {} as UsageRow['costs'] });

interface Store {
  rollups?: boolean;
  /** The groups a day of the top lists keeps; undefined: no lists. */
  perDay?: number | undefined;
  range?: RangeRoute;
  ready?: boolean;
  /** The groups of the range's slices taken away. */
  taken?: string[];
}

/** The route chosen for a filter on a store so described, and what was asked of the store to choose it. */
async function route<F, R>(routes: readonly ReportRoute<F, R>[], f: F, s: Store = {}): Promise<{ name: string; asked: string[] }> {
  const asked: string[] = [];
  const q: ReportInputs<F> = {
    f,
    rollups: s.rollups ?? true,
    listsPerDay: 'perDay' in s ? s.perDay : 3,
    // Read once, as the planner's own inputs do.
    range: () => {
      if (!asked.includes('range')) asked.push('range');
      return Promise.resolve(s.range ?? WHOLE);
    },
    taken: () => {
      if (!asked.includes('taken')) asked.push('taken');
      return Promise.resolve((s.taken ?? []).map(takenRow));
    },
    listsReady: (name) => {
      asked.push(`ready ${name}`);
      return Promise.resolve(s.ready ?? true);
    },
  };
  return { name: (await chooseRoute(routes, q)).name, asked };
}

const org = { orgId: 'org_a', from: Date.parse('2026-11-01T00:00:00Z'), to: Date.parse('2026-11-26T15:42:10Z') };

describe('usageReport routes', () => {
  it('scan: no rollups, one trace, or a grouping no rollup holds, asking the store nothing', async () => {
    expect(await route(USAGE_ROUTES, { ...org, by: 'model' }, { rollups: false })).toEqual({ name: 'scan', asked: [] });
    expect(await route(USAGE_ROUTES, { ...org, by: 'model', traceId: 't1' })).toEqual({ name: 'scan', asked: [] });
    expect(await route(USAGE_ROUTES, { ...org, by: 'trace', then: 'model' })).toEqual({ name: 'scan', asked: [] });
  });

  it('trace top list: traces ranked within a day list over whole days, the lists ready', async () => {
    expect(await route(USAGE_ROUTES, { ...org, by: 'trace', limit: 3 })).toEqual({ name: 'trace top list', asked: ['range', 'taken', 'ready trace'] });
  });

  it('session top list: sessions ranked within a day list over whole days, the lists ready', async () => {
    expect(await route(USAGE_ROUTES, { ...org, by: 'session', limit: 2 })).toEqual({ name: 'session top list', asked: ['range', 'taken', 'ready session'] });
  });

  it('traces: every trace, or a ranking the lists cannot answer', async () => {
    expect((await route(USAGE_ROUTES, { ...org, by: 'trace' })).name).toBe('traces');
    expect((await route(USAGE_ROUTES, { ...org, by: 'trace', limit: 4 })).name).toBe('traces');
    expect((await route(USAGE_ROUTES, { ...org, by: 'trace', limit: 3 }, { perDay: undefined })).name).toBe('traces');
    expect((await route(USAGE_ROUTES, { ...org, by: 'trace', limit: 3 }, { range: CUT })).name).toBe('traces');
    expect(await route(USAGE_ROUTES, { ...org, by: 'trace', limit: 3 }, { ready: false })).toEqual({
      name: 'traces',
      asked: ['range', 'taken', 'ready trace'],
    });
  });

  it('top lists over whole days less a slice: while the limit and the groups taken away fit in a day list', async () => {
    expect(await route(USAGE_ROUTES, { ...org, by: 'trace', limit: 2 }, { range: LESS, taken: ['t9'] })).toEqual({
      name: 'trace top list',
      asked: ['range', 'taken', 'ready trace'],
    });
    expect(await route(USAGE_ROUTES, { ...org, by: 'trace', limit: 2 }, { range: LESS, taken: ['t9', 't10'] })).toEqual({
      name: 'traces',
      asked: ['range', 'taken'],
    });
    expect((await route(USAGE_ROUTES, { ...org, by: 'session', limit: 3 }, { range: LESS, taken: ['s1'] })).name).toBe('daily rollup');
  });

  it('trace fields: a grouping only traces hold, or traces of one customer', async () => {
    expect((await route(USAGE_ROUTES, { ...org, by: 'trace', customerId: 'cust-1' })).name).toBe('trace fields');
    expect((await route(USAGE_ROUTES, { ...org, by: 'workflow', then: 'customer' })).name).toBe('trace fields');
    expect((await route(USAGE_ROUTES, { ...org, by: 'customer', then: 'trace' })).name).toBe('trace fields');
  });

  it('daily rollup: a grouping a per-day rollup holds, sessions included when the lists cannot rank them', async () => {
    for (const f of [
      { ...org, by: 'model' as const },
      { ...org, by: 'day' as const, then: 'model' as const },
      { ...org, by: 'customer' as const, customerId: 'cust-1', limit: 2 },
      { ...org, by: 'session' as const },
      { ...org, by: 'session' as const, limit: 2, customerId: 'cust-1' },
    ])
      expect((await route(USAGE_ROUTES, f)).name, JSON.stringify(f)).toBe('daily rollup');
    expect(await route(USAGE_ROUTES, { ...org, by: 'session', limit: 2 }, { ready: false })).toEqual({
      name: 'daily rollup',
      asked: ['range', 'taken', 'ready session'],
    });
  });
});

describe('countGroups routes', () => {
  it('trace top list: traces of whole days, no customer, the lists ready', async () => {
    expect(await route(COUNT_ROUTES, { ...org, by: 'trace' })).toEqual({ name: 'trace top list', asked: ['range', 'ready trace'] });
  });

  it('traces: traces of whole days with a customer, no lists, or lists not ready', async () => {
    expect(await route(COUNT_ROUTES, { ...org, by: 'trace', customerId: 'cust-1' })).toEqual({ name: 'traces', asked: ['range'] });
    expect((await route(COUNT_ROUTES, { ...org, by: 'trace' }, { perDay: undefined })).name).toBe('traces');
    expect((await route(COUNT_ROUTES, { ...org, by: 'trace' }, { ready: false })).name).toBe('traces');
  });

  it("whole days less a slice: counted from the rollups, but a customer's traces from the spans", async () => {
    expect((await route(COUNT_ROUTES, { ...org, by: 'trace' }, { range: LESS })).name).toBe('trace top list');
    expect((await route(COUNT_ROUTES, { ...org, by: 'trace' }, { range: LESS, perDay: undefined })).name).toBe('traces');
    expect((await route(COUNT_ROUTES, { ...org, by: 'trace', customerId: 'cust-1' }, { range: LESS })).name).toBe('scan');
  });

  it('scan: no rollups, a cut edge, one trace, or another grouping', async () => {
    expect(await route(COUNT_ROUTES, { ...org, by: 'trace' }, { rollups: false })).toEqual({ name: 'scan', asked: [] });
    expect(await route(COUNT_ROUTES, { ...org, by: 'trace' }, { range: CUT })).toEqual({ name: 'scan', asked: ['range'] });
    expect(await route(COUNT_ROUTES, { ...org, by: 'trace', traceId: 't1' })).toEqual({ name: 'scan', asked: [] });
    expect(await route(COUNT_ROUTES, { ...org, by: 'customer' })).toEqual({ name: 'scan', asked: [] });
  });
});

describe('dailyCosts routes', () => {
  it('nothing asked: an empty list of groups, asking the store nothing', async () => {
    expect(await route(DAILY_COST_ROUTES, { ...org, by: 'customer', groups: [] })).toEqual({ name: 'nothing asked', asked: [] });
  });

  it('daily rollup: a grouping a per-day rollup holds, over whole days', async () => {
    expect(await route(DAILY_COST_ROUTES, { ...org, by: 'model' })).toEqual({ name: 'daily rollup', asked: ['range'] });
    expect((await route(DAILY_COST_ROUTES, { ...org, by: 'customer', groups: ['cust-1'] })).name).toBe('daily rollup');
  });

  it('usage by day: no rollups, a grouping only traces hold, a cut edge, or a slice taken away', async () => {
    expect(await route(DAILY_COST_ROUTES, { ...org, by: 'model' }, { rollups: false })).toEqual({ name: 'usage by day', asked: [] });
    expect(await route(DAILY_COST_ROUTES, { ...org, by: 'trace' })).toEqual({ name: 'usage by day', asked: [] });
    expect((await route(DAILY_COST_ROUTES, { ...org, by: 'model' }, { range: CUT })).name).toBe('usage by day');
    expect((await route(DAILY_COST_ROUTES, { ...org, by: 'customer' }, { range: LESS })).name).toBe('usage by day');
  });
});

describe('groupLabels routes', () => {
  it('nothing asked: no groups, asking the store nothing', async () => {
    expect(await route(LABEL_ROUTES, { ...org, by: 'trace', groups: [] })).toEqual({ name: 'nothing asked', asked: [] });
  });

  it('trace rollups: labels of traces on a store with rollups', async () => {
    expect(await route(LABEL_ROUTES, { ...org, by: 'trace', groups: ['t1'] })).toEqual({ name: 'trace rollups', asked: [] });
  });

  it('customer rollups: names of customers on a store with rollups', async () => {
    expect(await route(LABEL_ROUTES, { ...org, by: 'customer', groups: ['cust-1'] })).toEqual({ name: 'customer rollups', asked: [] });
  });

  it('scan: a store without rollups', async () => {
    expect((await route(LABEL_ROUTES, { ...org, by: 'trace', groups: ['t1'] }, { rollups: false })).name).toBe('scan');
    expect((await route(LABEL_ROUTES, { ...org, by: 'customer', groups: ['cust-1'] }, { rollups: false })).name).toBe('scan');
  });
});
