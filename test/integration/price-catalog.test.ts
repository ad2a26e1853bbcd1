import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { bundledCatalog } from '@trace-ingest/shared/catalog';
import { loadConfig } from '@trace-ingest/shared/config';
import type { Provider } from '@pydantic/genai-prices';
import { createPricing } from '@trace-ingest/store/pricing';
import { PostgresControlStore } from '../../packages/store/src/control-store-postgres.js';
import { auditCatalog, importCatalog, listCatalogs, useCatalog } from '../../packages/cli/src/actions/catalog.js';
import { createContext, type CliContext } from '../../packages/cli/src/context.js';
import { makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * Catalog files made for the test, imported on a running server: a model
 * added, a price changed from a date, a malformed file refused with one line
 * while the catalog in force stays; and a PostgreSQL-backed replica taking an
 * import made elsewhere on its next refresh.
 */

const M = 1_000_000;

/** The release's catalog, changed by `edit`, written to a file of the test. */
function catalogFile(name: string, edit: (ps: Provider[]) => void): string {
  const providers = structuredClone(bundledCatalog().providers);
  edit(providers);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-catalog-'));
  onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, name);
  fs.writeFileSync(file, JSON.stringify(providers));
  return file;
}

const openai = (ps: Provider[]): Provider => {
  const p = ps.find((x) => x.id === 'openai');
  if (p === undefined) throw new Error('no openai in the catalog');
  return p;
};
const addModel = (ps: Provider[]) =>
  openai(ps).models.push({ id: 'newmodel-1', name: 'New model', match: { equals: 'newmodel-1' }, prices: { input_mtok: 1, output_mtok: 2 } } as never);
const reprice4o = (ps: Provider[]) => {
  const m = openai(ps).models.find((x) => x.id === 'gpt-4o');
  if (m === undefined) throw new Error('no gpt-4o');
  const earlier = Array.isArray(m.prices) ? m.prices : [{ prices: m.prices }];
  m.prices = [...earlier, { constraint: { start_date: '2026-11-01' }, prices: { input_mtok: 2, output_mtok: 8 } }] as never;
};

describe('prices import on a running server', () => {
  let t: TestServer;
  let ctx: CliContext;
  let key: string;
  beforeAll(async () => {
    t = await startTestServer();
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    ({ key } = await t.newKey('catalogs'));
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });

  async function priced(traceId: string, modelId: string, at: number) {
    const sent = makeTrace({
      traceId,
      spans: [makeSpan({ startTime: at, endTime: at + 1, provider: 'openai', modelId, usage: { inputTokens: M, outputTokens: M } })],
    });
    expect((await t.post({ version: 'v1', traces: [sent] }, { key })).status).toBe(202);
    const [row] = await t.spans('SELECT input_cost::DOUBLE AS i, output_cost::DOUBLE AS o, priced, price_source FROM spans WHERE trace_id = ?', [traceId]);
    return row;
  }

  it('adds a model, then changes a price from a date, each in force on the next request, each version kept', async () => {
    const release = bundledCatalog();
    const a = catalogFile('a.json', addModel);
    const dry = await importCatalog(ctx, { file: a, source: 'test-a', date: '2026-11-20', dryRun: true, actor: 'test' });
    expect(dry).toMatchObject({ dryRun: true, added: 1, changed: 0, removed: 0, replaces: expect.stringMatching(/^genai-prices@0\.1\.8\//) });
    expect(dry.changes).toEqual([expect.objectContaining({ kind: 'added', provider: 'openai', model: 'newmodel-1' })]);
    expect(await priced('c1', 'newmodel-1', Date.UTC(2026, 10, 21))).toMatchObject({ priced: false });

    const done = await importCatalog(ctx, { file: a, source: 'test-a', date: '2026-11-20', dryRun: false, actor: 'test' });
    expect(done).toMatchObject({ created: true, catalog: expect.stringMatching(/^test-a\/2026-11-20#[0-9a-f]{12}$/) });
    expect(await priced('c2', 'newmodel-1', Date.UTC(2026, 10, 21))).toEqual({ i: 1, o: 2, priced: true, price_source: `catalog:${done.catalog}` });

    const b = catalogFile('b.json', (ps) => {
      addModel(ps);
      reprice4o(ps);
    });
    const next = await importCatalog(ctx, { file: b, source: 'test-b', date: '2026-11-22', dryRun: true });
    expect(next.changes).toEqual([expect.objectContaining({ kind: 'changed', provider: 'openai', model: 'gpt-4o', from: ['2026-11-01'] })]);
    await importCatalog(ctx, { file: b, source: 'test-b', date: '2026-11-22', dryRun: false, actor: 'test' });
    expect(await priced('c3', 'gpt-4o', Date.UTC(2026, 10, 2))).toMatchObject({ i: 2, o: 8 });
    expect(await priced('c4', 'gpt-4o', Date.UTC(2026, 9, 15))).toMatchObject({ i: 2.5, o: 10 });

    const list = await listCatalogs(ctx);
    expect(list.map((c) => [c.catalog.split('#')[0], c.inForce])).toEqual([
      [`${release.meta.source}/${release.meta.date}`, false],
      ['test-a/2026-11-20', false],
      ['test-b/2026-11-22', true],
    ]);
    // The span priced by the first import keeps its version.
    const [kept] = await t.spans("SELECT price_source FROM spans WHERE trace_id = 'c2'");
    expect(kept?.price_source).toBe(`catalog:${done.catalog}`);

    await useCatalog(ctx, 'release');
    expect(await priced('c5', 'newmodel-1', Date.UTC(2026, 10, 21))).toMatchObject({ priced: false });
    await useCatalog(ctx, done.catalog.split('#')[1] ?? '');
    expect(await priced('c6', 'newmodel-1', Date.UTC(2026, 10, 21))).toMatchObject({ priced: true });
  });

  it("keeps the date of a price the file changes without dating it: from the catalog's date on, older spans keep theirs", async () => {
    await useCatalog(ctx, 'release');
    // gpt-4o-mini at $0.15/$0.60 in the release; the file says $0.2/$0.8 with no start date.
    const c = catalogFile('c.json', (ps) => {
      const m = openai(ps).models.find((x) => x.id === 'gpt-4o-mini');
      if (m === undefined || Array.isArray(m.prices)) throw new Error('no flat gpt-4o-mini');
      m.prices = { ...m.prices, input_mtok: 0.2, output_mtok: 0.8 };
    });
    const dry = await importCatalog(ctx, { file: c, source: 'test-c', date: '2026-11-25', dryRun: true });
    expect(dry.dated).toEqual(['openai/gpt-4o-mini']);
    expect(dry.changes).toEqual([expect.objectContaining({ kind: 'changed', model: 'gpt-4o-mini', from: ['2026-11-25'] })]);
    const done = await importCatalog(ctx, { file: c, source: 'test-c', date: '2026-11-25', dryRun: false, actor: 'test' });
    expect(done).toMatchObject({ created: true, dated: ['openai/gpt-4o-mini'] });
    expect(await priced('d1', 'gpt-4o-mini', Date.UTC(2026, 10, 26))).toMatchObject({ i: 0.2, o: 0.8, price_source: `catalog:${done.catalog}` });
    expect(await priced('d2', 'gpt-4o-mini', Date.UTC(2026, 10, 24))).toMatchObject({ i: 0.15, o: 0.6 });
    // The same file again: the dated version it made is the one kept, not a second one.
    expect(await importCatalog(ctx, { file: c, source: 'test-c', date: '2026-11-25', dryRun: false, actor: 'test' })).toMatchObject({
      created: false,
      catalog: done.catalog,
      changed: 0,
    });
  });

  it('refuses a malformed file with one line, and the catalog in force stays', async () => {
    const before = (await listCatalogs(ctx)).find((c) => c.inForce);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-catalog-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(
      bad,
      JSON.stringify([{ id: 'x', name: 'X', api_pattern: 'x', models: [{ id: 'm', match: { equals: 'm' }, prices: { input_mtok: 'free' } }] }]),
    );
    const err = await importCatalog(ctx, { file: bad, dryRun: false }).catch((e: unknown) => e as Error);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/^the catalog file is not a genai-prices data file \(data\.schema\.json\): \/0\/models\/0\/prices/);
    expect((err as Error).message).not.toContain('\n');
    fs.writeFileSync(bad, '[{"id": ');
    await expect(importCatalog(ctx, { file: bad, dryRun: false })).rejects.toThrow(/^the catalog file is not JSON: /);
    expect((await listCatalogs(ctx)).find((c) => c.inForce)).toEqual(before);
  });
});

describe('an import on PostgreSQL reaches every replica', () => {
  const url = process.env.TI_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const schema = `ti_catalog_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: url, max: 1 });
  afterAll(async () => {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  it("prices with another replica's import on its next refresh", async () => {
    const one = new PostgresControlStore(url, { schema });
    const two = new PostgresControlStore(url, { schema });
    await one.start();
    await two.start();
    onTestFinished(async () => {
      await one.close();
      await two.close();
    });
    const pricing = await createPricing(two, {});
    const span = makeSpan({
      provider: 'openai',
      modelId: 'newmodel-1',
      startTime: Date.UTC(2026, 10, 21),
      endTime: Date.UTC(2026, 10, 21) + 1,
      usage: { inputTokens: M },
    });
    expect(pricing.price(span, 'o').priced).toBe(false);
    const file = catalogFile('pg.json', addModel);
    const text = fs.readFileSync(file, 'utf8');
    const { createHash } = await import('node:crypto');
    await one.importCatalog({ source: 'pg', date: '2026-11-20', sha256: createHash('sha256').update(text).digest('hex'), data: text, importedBy: 'test' });
    await pricing.refresh();
    expect(pricing.price(span, 'o')).toMatchObject({ priced: true, input_cost: '1' });
  });
});

/**
 * Golden prices: the examples of models whose catalog price was wrong, priced
 * on the release's date with what it ships (the catalog and the adoptions its
 * audit justified), against the providers' list prices, per 1M tokens:
 * - DeepSeek, api-docs.deepseek.com/quick_start/pricing (in force since
 *   2025-09-05): deepseek-chat and deepseek-reasoner $0.28 input (cache
 *   miss), $0.028 cache hit, $0.42 output.
 * - Mistral, docs.mistral.ai/models/mistral-large-3-25-12 (Mistral Large 3,
 *   which mistral-large-latest names since December 2025): $0.5 input, $1.5
 *   output; mistral-large-2411 keeps its $2 / $6. mistral.ai/pricing as synced
 *   by llmpricing.site on 2026-05-28: mistral-small-latest (Mistral Small 3.2,
 *   2506) $0.06 input, $0.18 output.
 * - Anthropic, docs.claude.com/en/docs/about-claude/pricing (long context):
 *   Claude Sonnet 4 above 200k input tokens $6 input, $22.50 output, $0.60
 *   cache read, $7.50 cache write; $3 / $15 below.
 * - AWS, aws.amazon.com/bedrock/pricing (Anthropic): Claude Sonnet 4.5 on
 *   regional and geographic ids (us., eu., ..., and the in-region id) $3.30
 *   input, $16.50 output, above 200k input tokens $6.60 / $24.75; on the
 *   global endpoint $3 / $15, above 200k $6 / $22.50.
 * - xAI, docs.x.ai/docs/models: grok-4 (grok-4-0709) $3 input, $15 output,
 *   and above 128k tokens of context $6 / $30.
 * - Google, cloud.google.com/vertex-ai/generative-ai/pricing: Gemini 2.0
 *   Flash on Vertex AI $0.15 input, $0.60 output; the Gemini API's
 *   (ai.google.dev/pricing) $0.10 / $0.40.
 */
describe('golden prices on the release date', () => {
  const day = Date.parse('2026-11-24T12:00:00Z');
  const adopted = 'catalog:litellm@8442b939a6ea/2026-07-24';
  let ctx: CliContext;
  let price: (provider: string, modelId: string, usage: Record<string, number>) => Promise<Record<string, unknown>>;
  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-golden-'));
    ctx = createContext(loadConfig({ DATA_DIR: dir }));
    const pricing = await createPricing(await ctx.keys(), {});
    price = async (provider, modelId, usage) => {
      await pricing.refresh();
      return { ...pricing.price(makeSpan({ provider, modelId, startTime: day, endTime: day + 1, usage }), 'o') };
    };
    return async () => {
      await ctx.close();
      fs.rmSync(dir, { recursive: true, force: true });
    };
  });

  it('DeepSeek chat and reasoner at the September 2025 prices', async () => {
    for (const model of ['deepseek-chat', 'deepseek-reasoner']) {
      expect(await price('deepseek', model, { inputTokens: M, cachedInputTokens: M, outputTokens: M })).toMatchObject({
        input_cost: '0.28',
        cached_input_cost: '0.028',
        output_cost: '0.42',
        total_cost: '0.728',
        price_source: adopted,
      });
    }
  });

  it('mistral-large-latest as Mistral Large 3, and the 2411 version as before', async () => {
    expect(await price('mistral', 'mistral-large-latest', { inputTokens: M, outputTokens: M })).toMatchObject({
      input_cost: '0.5',
      output_cost: '1.5',
      price_source: adopted,
    });
    expect(await price('mistral', 'mistral-large-2411', { inputTokens: M, outputTokens: M })).toMatchObject({ input_cost: '2', output_cost: '6' });
  });

  it('mistral-small-latest at the Mistral Small 3.2 price', async () => {
    expect(await price('mistral', 'mistral-small-latest', { inputTokens: M, outputTokens: M })).toMatchObject({
      input_cost: '0.06',
      output_cost: '0.18',
      price_source: adopted,
    });
  });

  it('Claude Sonnet 4 above 200k prompt tokens, and below', async () => {
    expect(await price('anthropic', 'claude-sonnet-4-20250514', { inputTokens: 250_000, outputTokens: M })).toMatchObject({
      input_cost: '1.5',
      output_cost: '22.5',
      price_source: adopted,
    });
    expect(
      await price('anthropic', 'claude-sonnet-4-20250514', { inputTokens: 150_000, cachedInputTokens: 60_000, cacheWriteInputTokens: 10_000 }),
    ).toMatchObject({
      input_cost: '0.9',
      cached_input_cost: '0.036',
      cache_write_input_cost: '0.075',
    });
    expect(await price('anthropic', 'claude-sonnet-4-20250514', { inputTokens: 100_000, outputTokens: M })).toMatchObject({
      input_cost: '0.3',
      output_cost: '15',
    });
  });

  it('Bedrock Claude Sonnet 4.5 above 200k prompt tokens, regional and global', async () => {
    for (const model of ['us.anthropic.claude-sonnet-4-5-20250929-v1:0', 'anthropic.claude-sonnet-4-5-20250929-v1:0']) {
      expect(await price('aws.bedrock', model, { inputTokens: 250_000, outputTokens: M })).toMatchObject({
        input_cost: '1.65',
        output_cost: '24.75',
        price_source: adopted,
      });
      expect(await price('aws.bedrock', model, { inputTokens: 100_000, outputTokens: M })).toMatchObject({ input_cost: '0.33', output_cost: '16.5' });
    }
    expect(await price('aws.bedrock', 'global.anthropic.claude-sonnet-4-5-20250929-v1:0', { inputTokens: 250_000, outputTokens: M })).toMatchObject({
      input_cost: '1.5',
      output_cost: '22.5',
      price_source: adopted,
    });
  });

  it('grok-4 above 128k tokens, and below', async () => {
    expect(await price('x_ai', 'grok-4', { inputTokens: 150_000, outputTokens: M })).toMatchObject({
      input_cost: '0.9',
      output_cost: '30',
      price_source: adopted,
    });
    expect(await price('x_ai', 'grok-4', { inputTokens: 100_000, outputTokens: M })).toMatchObject({ input_cost: '0.3', output_cost: '15' });
  });

  it('Gemini 2.0 Flash on Vertex AI at the Vertex price, and on the Gemini API at its own', async () => {
    expect(await price('gcp.vertex_ai', 'gemini-2.0-flash-001', { inputTokens: M, outputTokens: M })).toMatchObject({
      input_cost: '0.15',
      output_cost: '0.6',
      price_source: adopted,
    });
    expect(await price('gcp.gen_ai', 'gemini-2.0-flash-001', { inputTokens: M, outputTokens: M })).toMatchObject({ input_cost: '0.1', output_cost: '0.4' });
  });

  it('audits the shipped catalogs: the adopted models agree, the rest is listed; an adoption is reversible', async () => {
    const r = await auditCatalog(ctx, { at: day });
    for (const m of [
      'deepseek-chat',
      'deepseek-reasoner',
      'mistral-large-latest',
      'mistral-small-latest',
      'gemini-2.0-flash-001',
      'grok-4-0709',
      'us.anthropic.claude-sonnet-4-5-20250929-v1:0',
    ])
      expect(r.findings.map((f) => f.model)).not.toContain(m);
    expect(r.findings.find((f) => f.model === 'open-mistral-nemo')).toMatchObject({
      provider: 'mistral',
      status: 'differs',
      diffs: [
        { bucket: 'input', tier: 'base', inForce: '0.15', second: '0.3' },
        { bucket: 'output', tier: 'base', inForce: '0.15', second: '0.3' },
      ],
    });
    expect(r.unknown).toBeGreaterThan(0);

    const adopt = await auditCatalog(ctx, { at: day, adopt: ['open-mistral-nemo'] });
    // Adopted under the catalog's id for the model, which open-mistral-nemo resolves to.
    expect(adopt.adopted).toEqual([expect.objectContaining({ provider: 'mistral', model: 'mistral-nemo', from: '2026-07-24' })]);
    expect(await price('mistral', 'open-mistral-nemo', { inputTokens: M })).toMatchObject({ input_cost: '0.3', price_source: adopted });
    await auditCatalog(ctx, { at: day, unadopt: ['open-mistral-nemo', 'deepseek-chat'] });
    expect(await price('mistral', 'open-mistral-nemo', { inputTokens: M })).toMatchObject({
      input_cost: '0.15',
      price_source: expect.stringMatching(/^catalog:genai-prices@/),
    });
    expect((await price('deepseek', 'deepseek-chat', { inputTokens: M })).price_source).toMatch(/^catalog:genai-prices@/);
    await expect(auditCatalog(ctx, { at: day, adopt: ['gpt-4o'] })).rejects.toThrow(/"gpt-4o" is not flagged by the audit/);
  });
});
