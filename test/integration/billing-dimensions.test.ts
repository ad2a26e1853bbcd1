import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { sumDecimals } from '@trace-ingest/shared/decimal';
import type { Span } from '@trace-ingest/shared/schema';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { auditCatalog } from '@trace-ingest/cli/actions/catalog';
import { createConsoleToken } from '@trace-ingest/cli/actions/console';
import { exportSpans } from '@trace-ingest/cli/actions/export';
import { showPrice, unpricedModels } from '@trace-ingest/cli/actions/prices';
import { repriceSpans, usageInWindow } from '@trace-ingest/cli/actions/usage';
import { adoptionsInForce, releaseAdoptions, storeAdoption } from '@trace-ingest/store/pricing';
import { makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * A month of spans covering each billing dimension beyond token counts on
 * each provider, sent to a running server; `usage` and the console must show
 * exactly the costs computed here by hand from the providers' list prices
 * (as listed in November 2026; the pages are cited in
 * packages/shared/src/billing-dimensions.test.ts):
 * - platform.openai.com/docs/pricing: gpt-realtime text $4 / $0.40 cached /
 *   $16, audio $32 / $0.40 cached / $64; gpt-5 Flex $0.625 / $0.0625 cached /
 *   $5, Priority $2.50 / $20; gpt-4o Batch $1.25 / $5; gpt-5.4 with US data
 *   residency +10% ($2.75 / $16.50).
 * - platform.claude.com/docs/en/about-claude/pricing: Claude Sonnet 4.5 $3,
 *   5-minute write $3.75, 1-hour write $6, read $0.30, $15 out; Batch half;
 *   Opus 4.6 with US-only inference 1.1x ($5.50 / $27.50); Priority Tier has
 *   no list price (the span is left unpriced and counted).
 * - ai.google.dev/gemini-api/docs/pricing: Gemini 2.5 Flash $0.30 text,
 *   $1.00 audio, $0.03 / $0.10 cached, $2.50 out, Batch half; Gemini 3.6
 *   Flash Flex $0.75 / $3.75. cloud.google.com/vertex-ai/generative-ai/pricing:
 *   Claude Sonnet 4.5 global $3 / $15, regional $3.30 / $16.50.
 * - aws.amazon.com/bedrock/pricing: Claude Sonnet 4.5 us. $3.30 / $16.50,
 *   global. $3 / $15, batch half; Nova Sonic text $0.06 / $0.24, speech
 *   $3.40 / $13.60.
 */

const day = (d: number) => Date.UTC(2026, 10, d, 12);
const K = 100_000;
const M = 1_000_000;

/** Each span: where it ran, how it was billed, its usage, and its cost by hand (USD). */
const SPANS: [number, Partial<Span>, string][] = [
  // 1000×4 + 2000×0.40 + 10,000×32 + 20,000×0.40 + 500×16 + 5000×64, per million
  [
    3,
    {
      provider: 'openai',
      modelId: 'gpt-realtime',
      usage: {
        inputTokens: 1000,
        cachedInputTokens: 2000,
        audioInputTokens: 10_000,
        cachedAudioInputTokens: 20_000,
        outputTokens: 500,
        audioOutputTokens: 5000,
      },
    },
    '0.6608',
  ],
  // 100k×0.625 + 100k×0.0625 + 100k×5
  [4, { provider: 'openai', modelId: 'gpt-5', serviceTier: 'flex', usage: { inputTokens: K, cachedInputTokens: K, outputTokens: K } }, '0.56875'],
  // 100k×2.50 + 100k×20
  [5, { provider: 'openai', modelId: 'gpt-5', serviceTier: 'priority', usage: { inputTokens: K, outputTokens: K } }, '2.25'],
  // 100k×1.25 + 100k×5
  [6, { provider: 'openai', modelId: 'gpt-4o', batch: true, usage: { inputTokens: K, outputTokens: K } }, '0.625'],
  // 100k×2.75 + 100k×16.50
  [7, { provider: 'openai', modelId: 'gpt-5.4', region: 'us', usage: { inputTokens: K, outputTokens: K } }, '1.925'],
  // 20k×3 + 20k×3.75 + 20k×6 + 20k×0.30 + 100k×15
  [
    8,
    {
      provider: 'anthropic',
      modelId: 'claude-sonnet-4-5-20250929',
      usage: { inputTokens: 20_000, cacheWriteInputTokens: 20_000, cacheWrite1hInputTokens: 20_000, cachedInputTokens: 20_000, outputTokens: K },
    },
    '1.761',
  ],
  // The same at half price.
  [
    9,
    {
      provider: 'anthropic',
      modelId: 'claude-sonnet-4-5-20250929',
      serviceTier: 'batch',
      usage: { inputTokens: 20_000, cacheWriteInputTokens: 20_000, cacheWrite1hInputTokens: 20_000, cachedInputTokens: 20_000, outputTokens: K },
    },
    '0.8805',
  ],
  // 100k×5.50 + 100k×27.50
  [10, { provider: 'anthropic', modelId: 'claude-opus-4-6', region: 'us', usage: { inputTokens: K, outputTokens: K } }, '3.3'],
  // Priority Tier: no list price per token.
  [11, { provider: 'anthropic', modelId: 'claude-sonnet-4-5-20250929', serviceTier: 'priority', usage: { inputTokens: K, outputTokens: K } }, '0'],
  // 100k×0.30 + 100k×1.00 + 100k×0.03 + 100k×0.10 + 100k×2.50
  [
    12,
    {
      provider: 'gcp.gemini',
      modelId: 'gemini-2.5-flash',
      usage: { inputTokens: K, audioInputTokens: K, cachedInputTokens: K, cachedAudioInputTokens: K, outputTokens: K },
    },
    '0.393',
  ],
  // 100k×0.15 + 100k×1.25
  [13, { provider: 'gcp.gemini', modelId: 'gemini-2.5-flash', batch: true, usage: { inputTokens: K, outputTokens: K } }, '0.14'],
  // 100k×0.75 + 100k×3.75
  [14, { provider: 'gcp.gemini', modelId: 'gemini-3.6-flash', serviceTier: 'flex', usage: { inputTokens: K, outputTokens: K } }, '0.45'],
  // 100k×3.30 + 100k×16.50, then 100k×3 + 100k×15
  [15, { provider: 'gcp.vertex_ai', modelId: 'claude-sonnet-4-5@20250929', region: 'us-east5', usage: { inputTokens: K, outputTokens: K } }, '1.98'],
  [16, { provider: 'gcp.vertex_ai', modelId: 'claude-sonnet-4-5@20250929', region: 'global', usage: { inputTokens: K, outputTokens: K } }, '1.8'],
  // 100k×3.30 + 100k×16.50; global 100k×3 + 100k×15; batch 100k×1.65 + 100k×8.25
  [17, { provider: 'aws.bedrock', modelId: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', usage: { inputTokens: K, outputTokens: K } }, '1.98'],
  [18, { provider: 'aws.bedrock', modelId: 'global.anthropic.claude-sonnet-4-5-20250929-v1:0', usage: { inputTokens: K, outputTokens: K } }, '1.8'],
  [19, { provider: 'aws.bedrock', modelId: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', batch: true, usage: { inputTokens: K, outputTokens: K } }, '0.99'],
  // 1M×0.06 + 1M×0.24 + 1M×3.40 + 1M×13.60
  [
    20,
    { provider: 'aws.bedrock', modelId: 'amazon.nova-sonic-v1:0', usage: { inputTokens: M, outputTokens: M, audioInputTokens: M, audioOutputTokens: M } },
    '17.3',
  ],
];

/** By model, as added up by hand from the spans above. */
const BY_MODEL: Record<string, { cost: string; spans: number; unpriced: number }> = {
  'gpt-realtime': { cost: '0.6608', spans: 1, unpriced: 0 },
  'gpt-5': { cost: '2.81875', spans: 2, unpriced: 0 },
  'gpt-4o': { cost: '0.625', spans: 1, unpriced: 0 },
  'gpt-5.4': { cost: '1.925', spans: 1, unpriced: 0 },
  'claude-sonnet-4-5-20250929': { cost: '2.6415', spans: 3, unpriced: 1 },
  'claude-opus-4-6': { cost: '3.3', spans: 1, unpriced: 0 },
  'gemini-2.5-flash': { cost: '0.533', spans: 2, unpriced: 0 },
  'gemini-3.6-flash': { cost: '0.45', spans: 1, unpriced: 0 },
  'claude-sonnet-4-5@20250929': { cost: '3.78', spans: 2, unpriced: 0 },
  'us.anthropic.claude-sonnet-4-5-20250929-v1:0': { cost: '2.97', spans: 2, unpriced: 0 },
  'global.anthropic.claude-sonnet-4-5-20250929-v1:0': { cost: '1.8', spans: 1, unpriced: 0 },
  'amazon.nova-sonic-v1:0': { cost: '17.3', spans: 1, unpriced: 0 },
};
const TOTAL = '38.80405';

const canonical = (v: unknown): string => {
  const s = String(v);
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
};

describe('a month of every billing dimension on every provider', () => {
  let t: TestServer;
  let ctx: CliContext;
  let key: string;
  beforeAll(async () => {
    t = await startTestServer({ CONSOLE_PORT: '0' });
    ({ key } = await t.newKey('acme'));
    const traces = SPANS.map(([d, s], i) =>
      makeTrace({ traceId: `bill-${i}`, customer: { id: 'c1' }, spans: [makeSpan({ spanId: `s-${i}`, startTime: day(d), endTime: day(d) + 500, ...s })] }),
    );
    expect((await t.post({ version: 'v1', traces }, { key })).status).toBe(202);
    await t.server.flush();
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });

  it('stores each span at its hand-computed cost, with its tier and region', async () => {
    const rows = await t.spans("SELECT trace_id, total_cost::VARCHAR AS c, priced, service_tier, region FROM spans WHERE trace_id LIKE 'bill-%'");
    const byTrace = new Map(rows.map((r) => [String(r.trace_id), r]));
    SPANS.forEach(([, s, cost], i) => {
      const r = byTrace.get(`bill-${i}`);
      expect(canonical(r?.c), `${s.modelId} ${s.serviceTier ?? ''} ${s.region ?? ''}`).toBe(cost);
      expect(r?.priced).toBe(cost !== '0');
    });
    expect(byTrace.get('bill-3')).toMatchObject({ service_tier: 'batch' });
    expect(byTrace.get('bill-1')).toMatchObject({ service_tier: 'flex' });
    // Bedrock's geography from the inference profile in the model id.
    expect(byTrace.get('bill-14')).toMatchObject({ region: 'us' });
    expect(byTrace.get('bill-15')).toMatchObject({ region: 'global' });
    expect(byTrace.get('bill-17')).toMatchObject({ region: '' });
  });

  it('usage by model equals the hand computation to the cent, each new bucket shown, the unpriced span counted', async () => {
    const { rows, total } = await usageInWindow(ctx, { org: 'acme', month: '2026-11', by: 'model' });
    expect(Object.fromEntries(rows.map((r) => [r.group, { cost: r.costs.total_cost, spans: r.spans, unpriced: r.unpricedSpans }]))).toEqual(BY_MODEL);
    expect(total.costs.total_cost).toBe(TOTAL);
    expect(total.unpricedSpans).toBe(1);
    const row = (m: string) => rows.find((r) => r.group === m);
    expect(row('gpt-realtime')?.costs).toMatchObject({ audio_input_cost: '0.32', cached_audio_input_cost: '0.008', audio_output_cost: '0.32' });
    expect(row('gpt-realtime')?.tokens).toMatchObject({ audio_input_tokens: 10_000, cached_audio_input_tokens: 20_000, audio_output_tokens: 5000 });
    // 20k×6 + 20k×3 (batch)
    expect(row('claude-sonnet-4-5-20250929')?.costs).toMatchObject({ cache_write_1h_input_cost: '0.18' });
    expect(row('amazon.nova-sonic-v1:0')?.costs).toMatchObject({ audio_input_cost: '3.4', audio_output_cost: '13.6' });
    // By day, from the rollups: the same total.
    const byDay = await usageInWindow(ctx, { org: 'acme', month: '2026-11', by: 'day' });
    expect(byDay.total.costs.total_cost).toBe(TOTAL);
  });

  it('the console shows the same costs per model and in total', async () => {
    const token = (await createConsoleToken(ctx, { name: 'finance' })).token;
    const res = await fetch(`http://127.0.0.1:${t.server.consolePort}/console/api/models?org=acme&from=2026-11-01&to=2026-11-30`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      rows: { group: string; spans: number; unpricedSpans: number; costs: Record<string, string> }[];
      total: { costs: Record<string, string>; unpricedSpans: number };
    };
    // Rows are by model, then provider: summed per model, exactly.
    const byModel: Record<string, { cost: string; spans: number; unpriced: number }> = {};
    for (const r of body.rows) {
      const m = (byModel[r.group] ??= { cost: '0', spans: 0, unpriced: 0 });
      m.cost = sumDecimals([m.cost, r.costs.total_cost ?? '0']);
      m.spans += r.spans;
      m.unpriced += r.unpricedSpans;
    }
    expect(byModel).toEqual(BY_MODEL);
    expect(body.total.costs.total_cost).toBe(TOTAL);
    expect(body.total.unpricedSpans).toBe(1);
  });

  it('exports every span with its tier, region and the cost of each new bucket, summing to the same total', async () => {
    const file = path.join(t.dir, 'november.ndjson');
    expect(await exportSpans(ctx, { org: 'acme', month: '2026-11', format: 'ndjson', out: file })).toMatchObject({ rows: SPANS.length });
    const rows = fs
      .readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(sumDecimals(rows.map((r) => String(r.total_cost)))).toBe(TOTAL);
    const realtime = rows.find((r) => r.model_id === 'gpt-realtime');
    expect(realtime).toMatchObject({ audio_input_tokens: 10_000, cached_audio_input_tokens: 20_000, audio_output_tokens: 5000 });
    expect(canonical(realtime?.audio_output_cost)).toBe('0.32');
    expect(rows.find((r) => r.trace_id === 'bill-14')).toMatchObject({ region: 'us' });
    expect(rows.find((r) => r.trace_id === 'bill-1')).toMatchObject({ service_tier: 'flex' });
    expect(rows.some((r) => Number(r.cache_write_1h_input_tokens) > 0)).toBe(true);
  });

  it('lists the unpriced span with its tier and why', async () => {
    const list = await unpricedModels(ctx);
    expect(list).toEqual([
      expect.objectContaining({ provider: 'anthropic', model: 'claude-sonnet-4-5-20250929', serviceTier: 'priority', spans: 1, why: 'no priority tier price' }),
    ]);
    await expect(showPrice(ctx, { model: 'claude-sonnet-4-5', provider: 'anthropic', tier: 'priority', at: '2026-11-11' })).rejects.toThrow(
      /no priority tier price/,
    );
    expect(await showPrice(ctx, { model: 'gpt-5', provider: 'openai', tier: 'flex', at: '2026-11-04' })).toMatchObject({
      serviceTier: 'flex',
      inputPerMtok: '0.625',
      outputPerMtok: '5',
    });
  });
});

describe('a reprice after a dated adoption', () => {
  let t: TestServer;
  let ctx: CliContext;
  beforeAll(async () => {
    t = await startTestServer();
    const { key } = await t.newKey('acme');
    // open-mistral-nemo: the catalog's $0.15 / $0.15; the second catalog's $0.30 / $0.30.
    const traces = [3, 9, 10, 20].map((d) =>
      makeTrace({
        traceId: `nemo-${d}`,
        spans: [makeSpan({ startTime: day(d), endTime: day(d) + 1, provider: 'mistral', modelId: 'open-mistral-nemo', usage: { inputTokens: M } })],
      }),
    );
    expect((await t.post({ version: 'v1', traces }, { key })).status).toBe(202);
    await t.server.flush();
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });

  const costs = async () =>
    Object.fromEntries(
      (await t.spans("SELECT trace_id, input_cost::VARCHAR AS c FROM spans WHERE trace_id LIKE 'nemo-%' ORDER BY trace_id")).map((r) => [
        String(r.trace_id),
        canonical(r.c),
      ]),
    );

  it('changes only the spans from its date', async () => {
    expect(await costs()).toEqual({ 'nemo-3': '0.15', 'nemo-9': '0.15', 'nemo-10': '0.15', 'nemo-20': '0.15' });
    const r = await auditCatalog(ctx, { adopt: ['open-mistral-nemo'], from: '2026-11-10', at: day(24) });
    expect(r.adopted).toEqual([expect.objectContaining({ provider: 'mistral', model: 'mistral-nemo', from: '2026-11-10' })]);
    const repriced = await repriceSpans(ctx, { org: 'acme', from: '2026-11-01', to: '2026-12-01' });
    expect(repriced).toMatchObject({ rowsScanned: 4, rowsChanged: 2, costBefore: '0.6', costAfter: '0.9' });
    expect(await costs()).toEqual({ 'nemo-3': '0.15', 'nemo-9': '0.15', 'nemo-10': '0.3', 'nemo-20': '0.3' });
    // Again: nothing left to change.
    expect(await repriceSpans(ctx, { org: 'acme', from: '2026-11-01', to: '2026-12-01' })).toMatchObject({ rowsChanged: 0 });
  });

  it("keeps a model's earlier adoption as its history when it is adopted again from another day", async () => {
    const keys = await ctx.keys();
    const base = { provider: 'mistral', model: 'mistral-nemo', source: 'test' };
    await storeAdoption(keys, { ...base, from: '2026-11-15', prices: { input_mtok: 0.4 } });
    const inForce = adoptionsInForce(await keys.listAdoptions(), releaseAdoptions()).filter((a) => a.model === 'mistral-nemo');
    expect(inForce.map((a) => [a.from, a.prices.input_mtok])).toEqual([
      ['2026-11-10', 0.3],
      ['2026-11-15', 0.4],
    ]);
    await repriceSpans(ctx, { org: 'acme', from: '2026-11-01', to: '2026-12-01' });
    expect(await costs()).toEqual({ 'nemo-3': '0.15', 'nemo-9': '0.15', 'nemo-10': '0.3', 'nemo-20': '0.4' });
  });
});
