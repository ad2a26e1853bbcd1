import { expect } from 'vitest';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { encodeLine, payloadToRows, UNPRICED, type SpanCosts, type SpanRow } from '@trace-ingest/shared/rows';
import type { Span } from '@trace-ingest/shared/schema';
import { countGroups, dailyCosts, GROUPS, groupLabels, traceSpans, usageReport, type GroupBy } from '../packages/store/src/reports.js';
import type { SpanStore } from '../packages/store/src/span-store.js';
import { makePayload, makeSpan, makeTrace } from './factories.js';

/**
 * Traffic for the rollup tests of every span store, and the check that the
 * rollups answer every report as a scan of the spans would.
 */

const DAY = 86_400_000;
const T0 = Date.parse('2026-10-04T20:00:00Z');

/** A price that depends on the model, so repricing with another changes some spans and not others. */
export function pricer(perToken: Record<string, string>) {
  return (span: Span): SpanCosts => {
    const unit = span.modelId === undefined ? undefined : perToken[span.modelId];
    if (unit === undefined) return UNPRICED;
    const input = parseDecimal(unit) * BigInt(span.usage?.inputTokens ?? 0);
    const output = parseDecimal(unit) * 3n * BigInt(span.usage?.outputTokens ?? 0);
    return {
      ...UNPRICED,
      input_cost: formatDecimal(input),
      output_cost: formatDecimal(output),
      total_cost: formatDecimal(input + output),
      priced: true,
      price_source: `test:${unit}`,
    };
  };
}

export const firstPrices = { 'gpt-4o': '0.0000025', 'claude-sonnet-4': '0.000003' };

/** A fixed pseudo-random sequence, so a failure can be replayed. */
function rng(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1_103_515_245 + 12_345) % 2_147_483_648;
    return s / 2_147_483_648;
  };
}

interface Batch {
  rows: SpanRow[];
}

/**
 * Traces as instrumentations send them: children first, the root (which
 * carries the customer and session) in a later batch or an earlier one,
 * traces that cross midnight, spans with no model and an unpriced model.
 */
export function traffic(seed: number): Batch[] {
  const rand = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const batches: Batch[] = [[], [], [], [], [], []].map(() => ({ rows: [] as SpanRow[] }));
  const price = pricer(firstPrices);
  for (let t = 0; t < 60; t++) {
    const traceId = `trace-${t}`;
    const start = T0 + Math.floor(rand() * 2.5 * DAY);
    const customer = t % 7 === 0 ? undefined : { id: `cust-${t % 5}`, name: `Customer ${t % 5}` };
    const session = t % 3 === 0 ? undefined : `sess-${t % 4}`;
    const rootFirst = t % 4 === 0;
    const children = 1 + Math.floor(rand() * 4);
    const rootSpan = makeSpan({ spanId: `${traceId}-root`, spanType: 'agent', name: 'agent', startTime: start, endTime: start + 60_000 });
    const childSpans = Array.from({ length: children }, (_, i) =>
      makeSpan({
        spanId: `${traceId}-c${i}`,
        parentSpanId: rootSpan.spanId,
        spanType: 'llm',
        name: 'chat',
        // Some children start hours after the root: the trace crosses midnight.
        startTime: start + i * (t % 5 === 0 ? 3 * 3_600_000 : 1_000),
        endTime: start + i * (t % 5 === 0 ? 3 * 3_600_000 : 1_000) + 500,
        provider: pick(['openai', 'anthropic', 'local']),
        modelId: pick(['gpt-4o', 'claude-sonnet-4', 'mystery-model']),
        usage: { inputTokens: 1 + Math.floor(rand() * 5000), outputTokens: Math.floor(rand() * 800) },
      }),
    );
    const root = makeTrace({
      traceId,
      traceName: 'support',
      ...(customer === undefined ? {} : { customer }),
      ...(session === undefined ? {} : { sessionId: session }),
    });
    // The children's requests know nothing of the trace's customer or session.
    const bare = makeTrace({ traceId, traceName: `child-request-${t}` });
    const rowsOf = (trace: typeof root, spans: Span[], receivedAt: number) =>
      payloadToRows(makePayload({ traces: [{ ...trace, spans }] }), { orgId: 'org_a', keyPrefix: 'ti_test', receivedAt }, (s) => price(s));
    const a = Math.floor(rand() * 3);
    const b = a + 1 + Math.floor(rand() * 2);
    const [first, second] = rootFirst ? [a, b] : [b, a];
    batches[first]?.rows.push(...rowsOf(root, [rootSpan], T0 + first * 1000));
    batches[second]?.rows.push(...rowsOf(bare, childSpans, T0 + second * 1000));
  }
  return batches;
}

/**
 * Batches that only add spans to traces and sessions (every request carries
 * its trace's customer and session, so nothing moves): traces that go on
 * over many batches, new ones in each, a few on the days around the busiest
 * (a trace seen on two days), unpriced spans (ties at no cost).
 */
export function addingTraffic(seed: number, batches = 24): Batch[] {
  const rand = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const price = pricer(firstPrices);
  const busiest = Date.parse('2026-10-05T00:00:00Z');
  const out: Batch[] = [];
  for (let b = 0; b < batches; b++) {
    const rows: SpanRow[] = [];
    for (let i = 0; i < 4 + Math.floor(rand() * 8); i++) {
      // Half the spans go to traces already under way, the rest to traces new in this batch.
      const t = rand() < 0.5 ? Math.floor(rand() * (3 + b * 3)) : 3 + b * 3 + i;
      const dayOffset = t % 11 === 0 ? pick([-3, -1, 2]) : 0;
      const start = busiest + dayOffset * DAY + Math.floor(rand() * DAY);
      const trace = makeTrace({
        traceId: `add-${t}`,
        traceName: 'assist',
        customer: { id: `cust-${t % 4}`, name: `Customer ${t % 4}` },
        sessionId: `add-sess-${t % 9}`,
        spans: [
          makeSpan({
            spanId: `add-${t}-${b}-${i}`,
            startTime: start,
            endTime: start + 700,
            provider: 'openai',
            modelId: pick(['gpt-4o', 'claude-sonnet-4', 'mystery-model']),
            usage: { inputTokens: 1 + Math.floor(rand() * 3000), outputTokens: Math.floor(rand() * 600) },
          }),
        ],
      });
      rows.push(...payloadToRows(makePayload({ traces: [trace] }), { orgId: 'org_a', keyPrefix: 'ti_test', receivedAt: T0 + b * 1000 }, (s) => price(s)));
    }
    out.push({ rows });
  }
  return out;
}

export const buf = (rows: readonly SpanRow[]) => Buffer.from(rows.map((r) => encodeLine(r) + '\n').join(''));

/** The same store read without its rollups: every report from the spans themselves. */
export function scanning(store: SpanStore): SpanStore {
  return Object.assign(Object.create(store) as SpanStore, { rollups: false });
}

const GROUPINGS: (readonly [GroupBy, GroupBy?])[] = [
  ...(Object.keys(GROUPS) as GroupBy[]).map((g) => [g] as const),
  ['day', 'model'],
  ['customer', 'day'],
  ['model', 'provider'],
  ['customer', 'session'],
  ['session', 'model'],
];

/** How many rankings cut between equal costs expectRollupsEqualScan compared (a test asserts it found some). */
export const tieCuts = { checked: 0 };

/** Waits for a store that derives its rollups in the background (ClickHouse) to have derived every stored span. */
export async function derived(store: SpanStore): Promise<void> {
  const settle = (store as { settle?: () => Promise<void> }).settle;
  if (settle !== undefined) await settle.call(store);
}

export async function expectRollupsEqualScan(store: SpanStore): Promise<void> {
  await derived(store);
  const scan = scanning(store);
  const ranges = [
    { from: Date.parse('2026-10-01T00:00:00Z'), to: Date.parse('2026-10-10T00:00:00Z') },
    { from: Date.parse('2026-10-05T00:00:00Z'), to: Date.parse('2026-10-06T00:00:00Z') },
    // Partial days at both edges.
    { from: Date.parse('2026-10-04T22:30:00Z'), to: Date.parse('2026-10-06T07:15:00Z') },
  ];
  for (const range of ranges)
    for (const [by, then] of GROUPINGS) {
      const f = { orgId: 'org_a', ...range, by, then };
      expect(await usageReport(store, f), `${by}${then === undefined ? '' : ` then ${then}`} ${JSON.stringify(range)}`).toEqual(await usageReport(scan, f));
      expect(await usageReport(store, { ...f, customerId: 'cust-1' })).toEqual(await usageReport(scan, { ...f, customerId: 'cust-1' }));
    }
  // Cuts with few rows beyond them (the first and last start of a day, as a client clock ahead leaves): whole days less those rows.
  const [day] = await scan.query("SELECT min(start_time) AS lo, max(start_time) AS hi FROM spans WHERE org_id = 'org_a' AND start_date = '2026-10-05'");
  if (day !== undefined && Number(day.hi) > Number(day.lo))
    for (const range of [
      { from: ranges[0]!.from, to: Number(day.hi) },
      { from: Number(day.lo) + 1, to: Number(day.hi) },
    ]) {
      for (const [by, limit, customerId] of [
        ['customer', undefined, undefined],
        ['model', undefined, 'cust-1'],
        ['trace', 3, undefined],
        ['session', 3, undefined],
        ['workflow', undefined, undefined],
      ] as const) {
        const f = { orgId: 'org_a', ...range, by, limit, customerId };
        expect(await usageReport(store, f), `${JSON.stringify(f)}`).toEqual(await usageReport(scan, f));
      }
      for (const customerId of [undefined, 'cust-1']) {
        const f = { orgId: 'org_a', ...range, by: 'trace' as const, customerId };
        expect(await countGroups(store, f), `traces counted ${JSON.stringify(f)}`).toBe(await countGroups(scan, f));
      }
    }
  const whole = { orgId: 'org_a', ...ranges[0]!, by: 'trace' as const };
  expect(await countGroups(store, whole)).toBe(await countGroups(scan, whole));
  // Ranked cuts: the groups of largest cost, then every measure of those groups.
  for (const by of ['trace', 'session', 'customer', 'model'] as const)
    for (const customerId of [undefined, 'cust-1']) {
      const f = { ...whole, by, customerId, limit: 3 };
      expect(await usageReport(store, f), `${by} limit 3${customerId === undefined ? '' : ' of cust-1'}`).toEqual(await usageReport(scan, f));
    }
  // A cut inside a run of equal costs (unpriced traces cost 0): ties go by group, as in the scan.
  for (const by of ['trace', 'session'] as const) {
    const all = await usageReport(scan, { ...whole, by });
    const tie = all.findIndex((r, i) => i > 0 && r.costs.total_cost === all[i - 1]?.costs.total_cost);
    if (tie <= 0) continue;
    const f = { ...whole, by, limit: tie };
    expect(await usageReport(store, f), `${by} limit ${tie}, cut between equal costs`).toEqual(all.slice(0, tie));
    tieCuts.checked++;
  }
  const traces = ['trace-0', 'trace-5', 'trace-13'];
  expect(await groupLabels(store, { ...whole, groups: traces })).toEqual(await groupLabels(scan, { ...whole, groups: traces }));
  const customers = { ...whole, by: 'customer' as const, groups: ['cust-1', 'cust-2', ''] };
  expect(await groupLabels(store, customers)).toEqual(await groupLabels(scan, customers));
  // A chart's series: one cost and span count per group and day, of the groups asked for or of all.
  for (const [by, groups] of [
    ['customer', ['cust-1', '']],
    ['customer', undefined],
    ['model', undefined],
  ] as const) {
    const f = { orgId: 'org_a', ...ranges[0]!, by, groups };
    const series = await dailyCosts(store, f);
    expect(series.length).toBeGreaterThan(0);
    expect(series, `daily costs by ${by}`).toEqual(await dailyCosts(scan, f));
    const rows = (await usageReport(scan, { ...f, then: 'day' })).filter((r) => groups === undefined || (groups as readonly string[]).includes(r.group));
    expect(sortSeries(series)).toEqual(sortSeries(rows.map((r) => ({ group: r.group, day: r.subgroup ?? '', cost: r.costs.total_cost, spans: r.spans }))));
  }
  expect(await traceSpans(store, { orgId: 'org_a', traceId: 'trace-5' })).toEqual(await traceSpans(scan, { orgId: 'org_a', traceId: 'trace-5' }));
}

const sortSeries = (xs: readonly { group: string; day: string; cost: string; spans: number }[]) =>
  [...xs].sort((a, b) => (a.group === b.group ? (a.day < b.day ? -1 : 1) : a.group < b.group ? -1 : 1));

/**
 * Rankings by trace and session from a store's top lists (of three a day)
 * equal a scan, batch after batch, and after a restart, a cheap trace's
 * costly span days later, an erasure and retention. `keys` counts the
 * list's (trace, day) rows and those of the traces table.
 */
export async function expectListsRankAsScan(
  store: () => SpanStore,
  opts: { restart(): Promise<void>; keys(): Promise<{ lists: number; traces: number }> },
): Promise<void> {
  const day = (d: string) => Date.parse(`2026-10-${d}T00:00:00Z`);
  const ranges = [
    { from: day('01'), to: day('12') },
    { from: day('05'), to: day('06') },
    { from: day('05'), to: day('07') },
    { from: day('06'), to: day('09') },
  ];
  const expectSameRanking = async (when: string) => {
    const scan = scanning(store());
    const withoutLists = Object.assign(Object.create(store()) as SpanStore, { topLists: undefined });
    for (const range of ranges) {
      const f = { orgId: 'org_a', ...range, by: 'trace' as const };
      for (const limit of [1, 2, 3]) {
        const [t, u] = [
          { ...f, limit },
          { ...f, by: 'session' as const, limit },
        ];
        expect(await usageReport(store(), t), `${when}: ${JSON.stringify(range)} limit ${limit}`).toEqual(await usageReport(scan, t));
        // Sessions against the rollup read without lists: sessions_daily keeps the costs of expired rows, which a scan no longer sees.
        expect(await usageReport(store(), u), `${when}: sessions ${JSON.stringify(range)} limit ${limit}`).toEqual(await usageReport(withoutLists, u));
      }
      // The console's labels of the traces it lists (read from the lists), and of traces the lists do not hold.
      const listed = (await usageReport(scan, { ...f, limit: 3 })).map((r) => r.group);
      const groups = [...listed, 'trace-1', 'trace-30', 'no-such-trace'];
      // Against the traces table (labels take the whole days around the range, which a scan of the range does not).
      const labels = await groupLabels(store(), { ...f, groups });
      expect(labels, `${when}: labels ${JSON.stringify(range)}`).toEqual(await groupLabels(withoutLists, { ...f, groups }));
      for (const g of listed) expect(labels[g], `${when}: label of ${g}`).toEqual((await groupLabels(scan, { ...f, groups: [g] }))[g]);
      expect(await countGroups(store(), f), `${when}: count ${JSON.stringify(range)}`).toBe(await countGroups(scan, f));
    }
  };
  const batches = traffic(5);
  for (const [i, b] of batches.entries()) {
    await store().insertLines(buf(b.rows), b.rows.length);
    await derived(store());
    await expectSameRanking(`batch ${i}`);
  }
  // The lists hold each day's first three traces and the traces of more than one day, not every trace.
  const keys = await opts.keys();
  expect(keys.lists).toBeLessThan(keys.traces);
  await opts.restart();
  // A cheap trace of one day gets a costly span days later: it now ranks first in ranges over both days.
  const cheapest = (await usageReport(scanning(store()), { orgId: 'org_a', ...ranges[0]!, by: 'trace' })).at(-1)!;
  const [row] = batches.flatMap((b) => b.rows).filter((r) => r.trace_id === cheapest.group);
  const late = row!.start_time + 2 * DAY;
  const lateRow = {
    ...row!,
    span_id: 'late-span',
    start_time: late,
    end_time: late + 1000,
    start_date: new Date(late).toISOString().slice(0, 10),
    total_cost: '25',
    output_cost: '25',
  };
  await store().insertLines(buf([lateRow]), 1);
  await derived(store());
  expect((await usageReport(store(), { orgId: 'org_a', ...ranges[0]!, by: 'trace', limit: 1 }))[0]?.group).toBe(cheapest.group);
  await expectSameRanking('late span');
  await store().erase('org_a', { kind: 'customer', id: 'cust-2' }, false);
  await derived(store());
  await expectSameRanking('erasure');
  await store().expire({ orgId: 'org_a', rowsBefore: day('06') }, 1_000_000);
  await derived(store());
  await expectSameRanking('retention');
}
