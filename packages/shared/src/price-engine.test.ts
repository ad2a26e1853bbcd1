import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { makeOverride, makeSpan } from '../../../test/factories.js';
import { formatDecimal, parseDecimal } from './decimal.js';
import { PriceEngine, type PriceOverride } from './price-engine.js';
import type { Span } from './schema.js';

// Noon UTC, outside any off-peak window; after the 2025-06 o3 price cut.
const NOON = Date.UTC(2026, 0, 15, 12, 0, 0);
const M = 1_000_000;

/** Public list prices in USD per 1M tokens: [provider given, model, input, cached input, output]. */
const LIST: [string | undefined, string, string, string, string][] = [
  ['openai', 'gpt-4o', '2.5', '1.25', '10'],
  [undefined, 'gpt-4o-mini', '0.15', '0.075', '0.6'],
  ['openai', 'gpt-4.1', '2', '0.5', '8'],
  ['openai', 'gpt-4.1-mini', '0.4', '0.1', '1.6'],
  ['openai', 'gpt-4.1-nano', '0.1', '0.025', '0.4'],
  ['openai', 'o3', '2', '0.5', '8'],
  ['openai', 'o4-mini', '1.1', '0.275', '4.4'],
  ['openai', 'o1', '15', '7.5', '60'],
  ['anthropic', 'claude-sonnet-4-20250514', '3', '0.3', '15'],
  ['anthropic', 'claude-opus-4-1', '15', '1.5', '75'],
  [undefined, 'claude-3-5-haiku-20241022', '0.8', '0.08', '4'],
  ['anthropic', 'claude-3-haiku-20240307', '0.25', '0.03', '1.25'],
  ['google', 'gemini-2.5-pro', '1.25', '0.125', '10'],
  ['google', 'gemini-2.0-flash', '0.1', '0.025', '0.4'],
  ['mistral', 'mistral-large-latest', '2', '2', '6'],
  ['deepseek', 'deepseek-chat', '0.27', '0.07', '1.1'],
  ['x_ai', 'grok-3', '3', '0.75', '15'],
  ['xai', 'grok-3-mini', '0.3', '0.075', '0.5'],
  ['cohere', 'command-r-plus', '2.5', '2.5', '10'],
  ['cohere', 'command-r', '0.15', '0.15', '0.6'],
  ['groq', 'llama-3.3-70b-versatile', '0.59', '0.59', '0.79'],
  ['groq', 'llama-3.1-8b-instant', '0.05', '0.05', '0.08'],
  ['openai', 'text-embedding-3-small', '0.02', '0.02', '0'],
  ['openai', 'text-embedding-3-large', '0.13', '0.13', '0'],
  ['openai', 'openai/gpt-4o', '2.5', '1.25', '10'],
  [undefined, 'openai/gpt-4o-mini', '0.15', '0.075', '0.6'],
  ['openai', 'gpt-4o-2024-08-06', '2.5', '1.25', '10'],
];

const span = (p: Partial<Span>): Span => makeSpan({ startTime: NOON, endTime: NOON + 1000, ...p });

describe('PriceEngine with the catalog', () => {
  let engine: PriceEngine;
  beforeAll(async () => {
    engine = await PriceEngine.create();
  });

  // 100k of each (200k prompt tokens: under every long-context threshold) costs a tenth of the list price.
  const tenth = (v: string) => formatDecimal(parseDecimal(v) / 10n);

  it.each(LIST)('%s %s: costs the list price per dimension', (provider, model, input, cached, output) => {
    const c = engine.price(span({ provider, modelId: model, usage: { inputTokens: M / 10, cachedInputTokens: M / 10, outputTokens: M / 10 } }), 'org');
    expect(c.priced).toBe(true);
    expect(c.price_source).toMatch(/^catalog:genai-prices@/);
    expect([c.input_cost, c.cached_input_cost, c.output_cost]).toEqual([tenth(input), tenth(cached), tenth(output)]);
    expect(c.total_cost).toBe(tenth(formatDecimal(parseDecimal(input) + parseDecimal(cached) + parseDecimal(output))));
  });

  it('prices cache writes at their own rate (Anthropic)', () => {
    const c = engine.price(
      span({
        provider: 'anthropic',
        modelId: 'claude-sonnet-4-20250514',
        usage: { inputTokens: 1000, cacheWriteInputTokens: 2000, cachedInputTokens: 10_000, outputTokens: 500 },
      }),
      'o',
    );
    // 1000 × 3 + 2000 × 3.75 + 10000 × 0.30 + 500 × 15, per million
    expect(c).toMatchObject({ input_cost: '0.003', cache_write_input_cost: '0.0075', cached_input_cost: '0.003', output_cost: '0.0075', total_cost: '0.021' });
  });

  it('prices reasoning tokens at the output rate when the model has no reasoning price, separately from output', () => {
    const c = engine.price(span({ provider: 'openai', modelId: 'o4-mini', usage: { inputTokens: 2000, outputTokens: 300, reasoningTokens: 1200 } }), 'o');
    // 2000 × 1.10 + 300 × 4.40 + 1200 × 4.40, per million
    expect(c).toMatchObject({ input_cost: '0.0022', output_cost: '0.00132', reasoning_cost: '0.00528', total_cost: '0.0088' });
  });

  it('picks the long-context tier of gemini-2.5-pro on the whole prompt', () => {
    const under = engine.price(span({ provider: 'google', modelId: 'gemini-2.5-pro', usage: { inputTokens: 200_000, outputTokens: 1000 } }), 'o');
    expect(under).toMatchObject({ input_cost: '0.25', output_cost: '0.01' });
    const over = engine.price(
      span({ provider: 'google', modelId: 'gemini-2.5-pro', usage: { inputTokens: 150_000, cachedInputTokens: 60_000, outputTokens: 1000 } }),
      'o',
    );
    // 210k input in all: 150k × 2.50 + 60k × 0.25 + 1000 × 15, per million
    expect(over).toMatchObject({ input_cost: '0.375', cached_input_cost: '0.015', output_cost: '0.015', total_cost: '0.405' });
  });

  it('uses the price in force at the span start (o3 before and after the 2025-06 cut)', () => {
    const usage = { inputTokens: M, outputTokens: M };
    const before = engine.price(span({ modelId: 'o3', usage, startTime: Date.UTC(2025, 4, 1), endTime: Date.UTC(2025, 4, 1) }), 'o');
    const after = engine.price(span({ modelId: 'o3', usage, startTime: Date.UTC(2025, 6, 1), endTime: Date.UTC(2025, 6, 1) }), 'o');
    expect([before.input_cost, before.output_cost]).toEqual(['10', '40']);
    expect([after.input_cost, after.output_cost]).toEqual(['2', '8']);
  });

  it('applies time-of-day prices (DeepSeek off-peak) by half-hour', () => {
    const offPeak = Date.UTC(2026, 0, 15, 17, 0, 0);
    const c = engine.price(
      span({ provider: 'deepseek', modelId: 'deepseek-chat', usage: { inputTokens: M, outputTokens: M }, startTime: offPeak, endTime: offPeak }),
      'o',
    );
    expect([c.input_cost, c.output_cost]).toEqual(['0.135', '0.55']);
  });

  it('prices web searches per call', () => {
    const c = engine.price(span({ provider: 'openai', modelId: 'gpt-4o-mini', usage: { webSearchCount: 3 } }), 'o');
    expect(c).toMatchObject({ web_search_cost: '0.03', total_cost: '0.03' });
  });

  it('leaves unknown models and spans without a model unpriced, with zero costs', () => {
    for (const s of [span({ modelId: 'my-finetune-v7', usage: { inputTokens: 5 } }), span({ usage: { inputTokens: 5 } })]) {
      expect(engine.price(s, 'o')).toMatchObject({ priced: false, total_cost: '0', input_cost: '0', price_source: '' });
    }
  });

  it('prices a model with no usage at zero, but as priced', () => {
    expect(engine.price(span({ modelId: 'gpt-4o' }), 'o')).toMatchObject({ priced: true, total_cost: '0' });
  });
});

/** An override of gpt-4o's input and output prices, in force always (its org given per test). */
const { orgId: _org, ...base } = makeOverride({ model: 'gpt-4o' });

describe('PriceEngine overrides', () => {
  const usage = { inputTokens: M, outputTokens: M, cachedInputTokens: M };

  it('org override > global override > catalog, and falls back visibly', async () => {
    const engine = await PriceEngine.create({
      overrides: [
        { ...base, id: 'g', orgId: '' },
        { ...base, id: 'a', orgId: 'org-a', inputPerMtok: '0.5', outputPerMtok: '0.75', cachedInputPerMtok: '0.1' },
      ],
    });
    const a = engine.price(span({ modelId: 'gpt-4o', usage }), 'org-a');
    expect(a).toMatchObject({ input_cost: '0.5', cached_input_cost: '0.1', output_cost: '0.75', price_source: 'override:a' });
    const b = engine.price(span({ modelId: 'gpt-4o', usage }), 'org-b');
    // No cached price in the global override: cache reads are billed as input.
    expect(b).toMatchObject({ input_cost: '1', cached_input_cost: '1', output_cost: '2', price_source: 'override:g' });
    expect(engine.quote({ orgId: 'org-b', model: 'gpt-4o', at: NOON })?.fallbacks).toEqual({
      cachedInput: 'input',
      cacheWriteInput: 'input',
      reasoning: 'output',
    });
    engine.setOverrides([]);
    expect(engine.price(span({ modelId: 'gpt-4o', usage }), 'org-a').price_source).toMatch(/^catalog:/);
  });

  it('prices a self-hosted model only from its override, from its start date', async () => {
    const from = Date.UTC(2026, 0, 1);
    const engine = await PriceEngine.create({
      overrides: [{ ...base, id: 'x', orgId: '', provider: 'vllm', model: 'my-llama', validFrom: from, requestEach: '0.001' }],
    });
    expect(engine.price(span({ provider: 'vllm', modelId: 'my-llama', usage: { requestCount: 2 } }), 'o')).toMatchObject({
      request_cost: '0.002',
      priced: true,
    });
    expect(engine.price(span({ provider: 'other', modelId: 'my-llama', usage: { requestCount: 2 } }), 'o').priced).toBe(false);
    expect(engine.price(span({ provider: 'vllm', modelId: 'my-llama', startTime: from - 1, endTime: from }), 'o').priced).toBe(false);
  });
});

describe('PriceEngine override start inside a 30-minute bucket', () => {
  const start = Date.UTC(2026, 5, 10, 12, 10);
  const override: PriceOverride = { ...base, id: 'mid', orgId: 'org-a', validFrom: start };
  const at = (t: number) => span({ modelId: 'gpt-4o', usage: { inputTokens: M, outputTokens: M }, startTime: t, endTime: t + 1000 });

  it('prices each span by whether the override was in force at its start, whichever is priced first', async () => {
    for (const order of [
      [start - 5 * 60_000, start + 5 * 60_000, start],
      [start + 5 * 60_000, start, start - 5 * 60_000],
    ]) {
      const engine = await PriceEngine.create({ overrides: [override] });
      const sources = new Map(order.map((t) => [t, engine.price(at(t), 'org-a').price_source]));
      expect(sources.get(start - 5 * 60_000)).toMatch(/^catalog:/);
      expect(sources.get(start)).toBe('override:mid');
      expect(sources.get(start + 5 * 60_000)).toBe('override:mid');
    }
  });
});

describe('PRICE_CATALOG_FILE', () => {
  it('loads a catalog in the library format with no network', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-cat-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'data.json');
    fs.writeFileSync(
      file,
      JSON.stringify([
        {
          id: 'acme',
          name: 'Acme',
          api_pattern: 'acme',
          model_match: { starts_with: 'acme-' },
          models: [{ id: 'acme-1', match: { equals: 'acme-1' }, prices: { input_mtok: 4, output_mtok: 8 } }],
        },
      ]),
    );
    const engine = await PriceEngine.create({ catalogFile: file });
    expect(engine.catalogVersion).toMatch(/^data\.json\/\d{4}-\d{2}-\d{2}#[0-9a-f]{12}$/);
    expect(engine.price(span({ modelId: 'acme-1', usage: { inputTokens: M, outputTokens: M } }), 'o')).toMatchObject({ input_cost: '4', output_cost: '8' });
    fs.writeFileSync(file, '{"not": "a catalog"}');
    await expect(PriceEngine.create({ catalogFile: file })).rejects.toThrow(
      /^the catalog file is not a genai-prices data file \(data.schema.json\): the document must be array$/,
    );
  });

  it('prices with the catalog the product ships unless told otherwise, and names it in price_source', async () => {
    const engine = await PriceEngine.create();
    expect(engine.catalogVersion).toMatch(/^genai-prices@0\.1\.8\/2026-09-23#[0-9a-f]{12}$/);
    expect(engine.price(span({ modelId: 'gpt-4o', usage: { inputTokens: M } }), 'o').price_source).toBe(`catalog:${engine.catalogVersion}`);
  });
});
