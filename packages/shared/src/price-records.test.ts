import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeSpan } from '../../../test/factories.js';
import { CATALOG_DIR } from './catalog.js';
import { PriceEngine } from './price-engine.js';
import { auditPrices, bundledSecondCatalog } from './price-audit.js';
import { invalidPriceKeys, mergePrices, type Adoption } from './price-records.js';
import type { Span } from './schema.js';

const M = 1_000_000;
const at = (day: string): number => Date.parse(`${day}T12:00:00Z`);

describe('dated prices on top of the catalog', () => {
  const entry = { prices: { input_mtok: 3, cache_read_mtok: 0.75, output_mtok: 15 }, index: 0, from: -Infinity };
  const record = (from: string, prices: Adoption['prices']): Adoption => ({ provider: 'x', model: 'm', from, source: `s-${from}`, prices });

  it('changes only the keys an adoption states, each from the newest source', () => {
    const merged = mergePrices({ entry, tag: 'cat' }, [
      { index: 0, adoption: record('2025-07-09', { input_mtok: { base: 3, tiers: [{ start: 128_000, price: 6 }] }, output_mtok: 15 }) },
      { index: 1, adoption: record('2026-01-01', { output_mtok: 12 }) },
    ]);
    expect(merged.get('cache_read_mtok')).toEqual({ value: 0.75, from: { source: 'cat', from: -Infinity, record: -1 } });
    expect(merged.get('input_mtok')?.from.source).toBe('s-2025-07-09');
    expect(merged.get('output_mtok')).toMatchObject({ value: 12, from: { source: 's-2026-01-01' } });
  });

  it("lets a catalog price dated after an adoption win the keys it states, and keeps the adoption's other keys", () => {
    const dated = { prices: { input_mtok: 2, output_mtok: 10 }, index: 1, from: Date.parse('2026-03-01T00:00:00Z') };
    const merged = mergePrices({ entry: dated, tag: 'cat' }, [{ index: 0, adoption: record('2025-07-09', { input_mtok: 3, cache_write_1h_mtok: 6 }) }]);
    expect(merged.get('input_mtok')?.value).toBe(2);
    expect(merged.get('cache_write_1h_mtok')?.value).toBe(6);
  });

  it('fills only what nothing more specific states from a rule of every model', () => {
    const merged = mergePrices({ entry, tag: 'cat' }, [
      { index: 0, adoption: { ...record('2024-01-01', { 'tier:batch.multiplier': 0.5, 'region:us.multiplier': 1.1 }), model: '*' } },
      { index: 1, adoption: record('2023-01-01', { 'region:us.multiplier': 1 }) },
    ]);
    expect(merged.get('tier:batch.multiplier')?.value).toBe(0.5);
    expect(merged.get('region:us.multiplier')?.value).toBe(1);
  });

  it('refuses keys it cannot price', () => {
    expect(invalidPriceKeys({ model: 'm', prices: { input_mtok: 1, 'tier:flex.output_mtok': 2, 'region:us.multiplier': 1.1 } })).toBeUndefined();
    expect(invalidPriceKeys({ model: 'm', prices: { inptu_mtok: 1 } })).toMatch(/unknown price key/);
    expect(invalidPriceKeys({ model: '*', prices: { input_mtok: 1 } })).toMatch(/tier and region prices only/);
    expect(invalidPriceKeys({ model: 'm', prices: { multiplier: 2 } })).toMatch(/tier's or region's/);
  });
});

/** The release's adoptions, re-checked: what they state from their day, nothing else, on every spelling. */
describe("the release's adoptions", () => {
  let engine: PriceEngine;
  beforeAll(async () => {
    const { adoptions } = JSON.parse(fs.readFileSync(path.join(CATALOG_DIR, 'adoptions.json'), 'utf8')) as { adoptions: Adoption[] };
    engine = await PriceEngine.create({ adoptions });
  });
  const price = (day: string, p: Partial<Span>) => engine.price(makeSpan({ startTime: at(day), endTime: at(day) + 1, ...p }), 'o');

  it("keep an alias's history: mistral-large-latest is Large 2411 before 2025-12-02, Large 3 from then", () => {
    const usage = { inputTokens: M, outputTokens: M };
    // docs.mistral.ai: Mistral Large 2411 $2 / $6; Mistral Large 3 (2512, released 2025-12-02) $0.5 / $1.5.
    expect(price('2025-11-15', { provider: 'mistral', modelId: 'mistral-large-latest', usage })).toMatchObject({ input_cost: '2', output_cost: '6' });
    expect(price('2026-01-15', { provider: 'mistral', modelId: 'mistral-large-latest', usage })).toMatchObject({ input_cost: '0.5', output_cost: '1.5' });
    expect(price('2026-01-15', { provider: 'mistral', modelId: 'mistral-large-2411', usage })).toMatchObject({ input_cost: '2', output_cost: '6' });
  });

  it("drop no bucket they do not state: grok-4's $0.75 cached input, Claude Sonnet 4's one-hour write and web search", () => {
    // docs.x.ai/docs/models: grok-4 $3 in, $0.75 cached, $15 out.
    expect(price('2026-11-16', { provider: 'x_ai', modelId: 'grok-4', usage: { inputTokens: 10_000, cachedInputTokens: 10_000 } })).toMatchObject({
      input_cost: '0.03',
      cached_input_cost: '0.0075',
    });
    // platform.claude.com pricing: Claude Sonnet 4 1-hour cache write $6; web search $10 per 1,000.
    expect(
      price('2026-11-16', { provider: 'anthropic', modelId: 'claude-sonnet-4-20250514', usage: { cacheWrite1hInputTokens: 10_000, webSearchCount: 2 } }),
    ).toMatchObject({ cache_write_1h_input_cost: '0.06', web_search_cost: '0.02' });
  });

  it('hold from their day: DeepSeek before its 2025-09-05 prices is priced as the catalog has it', () => {
    const usage = { inputTokens: M, outputTokens: M };
    expect(price('2025-09-04', { provider: 'deepseek', modelId: 'deepseek-chat', usage })).toMatchObject({ input_cost: '0.27', output_cost: '1.1' });
    expect(price('2025-09-06', { provider: 'deepseek', modelId: 'deepseek-chat', usage })).toMatchObject({ input_cost: '0.28', output_cost: '0.42' });
  });

  it('apply a long-context tier to every spelling of the model on the same cloud', () => {
    // Claude Sonnet 4 above 200k input tokens: $6 / $22.50 on Bedrock (aws.amazon.com/bedrock/pricing) and Vertex AI
    // (cloud.google.com/vertex-ai/generative-ai/pricing), as on the Anthropic API.
    const usage = { inputTokens: 250_000, outputTokens: M };
    for (const [provider, modelId] of [
      ['aws.bedrock', 'anthropic.claude-sonnet-4-20250514-v1:0'],
      ['aws.bedrock', 'us.anthropic.claude-sonnet-4-20250514-v1:0'],
      ['aws.bedrock', 'eu.anthropic.claude-sonnet-4-20250514-v1:0'],
      ['aws.bedrock', 'apac.anthropic.claude-sonnet-4-20250514-v1:0'],
      ['aws.bedrock', 'global.anthropic.claude-sonnet-4-20250514-v1:0'],
      ['gcp.vertex_ai', 'claude-sonnet-4@20250514'],
      ['gcp.vertex_ai', 'claude-sonnet-4'],
      ['anthropic', 'claude-sonnet-4-20250514'],
      ['anthropic', 'claude-sonnet-4-0'],
    ]) {
      expect(price('2026-01-15', { provider, modelId, usage }), `${provider} ${modelId}`).toMatchObject({ input_cost: '1.5', output_cost: '22.5' });
    }
  });

  it("price GovCloud's Sonnet 4.5 apart from the commercial regions", () => {
    // aws.amazon.com/bedrock/pricing, AWS GovCloud (US): Claude Sonnet 4.5 $3.60 / $18.
    const usage = { inputTokens: M / 10, outputTokens: M / 10 };
    expect(price('2026-01-15', { provider: 'aws.bedrock', modelId: 'us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0', usage })).toMatchObject({
      input_cost: '0.36',
      output_cost: '1.8',
    });
    expect(price('2026-01-15', { provider: 'aws.bedrock', modelId: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', usage })).toMatchObject({
      input_cost: '0.33',
      output_cost: '1.65',
    });
  });

  it('leave the audit nothing to say on the models they adopt, and show every source of a disagreement with its day', () => {
    const findings = auditPrices(engine, bundledSecondCatalog(), { at: at('2026-11-24') });
    for (const m of ['grok-4-0709', 'claude-sonnet-4-20250514', 'mistral-large-latest', 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', 'gpt-5'])
      expect(findings.map((f) => f.model)).not.toContain(m);
    const nemo = findings.find((f) => f.model === 'open-mistral-nemo');
    // The catalog's data (2026-09-23) is newer than the second catalog's (2026-07-24): it is listed first.
    expect(nemo?.diffSources[0]).toEqual([
      expect.objectContaining({
        kind: 'catalog',
        source: expect.stringMatching(/^genai-prices@0\.1\.8\//) as unknown,
        asOf: '2026-09-23',
        price: '0.15',
        inForce: true,
      }),
      expect.objectContaining({ kind: 'second catalog', source: 'litellm@8442b939a6ea/2026-07-24', asOf: '2026-07-24', price: '0.3', inForce: false }),
    ]);
  });
});
