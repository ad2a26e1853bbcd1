import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { calcPrice, waitForUpdate, type Provider } from '@pydantic/genai-prices';
import { afterAll, describe, expect, it } from 'vitest';
import { formatDecimal, parseDecimal } from './money.js';
import { costsFor, PriceEngine, type PriceOverride, type UnitPrices } from './pricing.js';
import { UNPRICED, type SpanCosts } from './rows.js';
import type { Span, Usage } from './schema.js';

const CATALOG = 'catalog:genai-prices@0.1.8';
// 2025-09-01 12:00 UTC: after the o3 price cut, inside DeepSeek's standard-price hours.
const T = Date.UTC(2025, 8, 1, 12);

const engine = new PriceEngine();

function span(provider: string | undefined, modelId: string | undefined, usage?: Usage, startTime = T): Span {
  return {
    spanId: 's1',
    spanType: 'llm',
    name: 'call',
    startTime,
    endTime: startTime + 1000,
    ...(provider === undefined ? {} : { provider }),
    ...(modelId === undefined ? {} : { modelId }),
    ...(usage === undefined ? {} : { usage }),
  };
}

type Costs = [input: string, cached: string, cacheWrite: string, output: string, reasoning: string, webSearch: string, total: string];

function costs(c: Costs, source = CATALOG, extra: Partial<SpanCosts> = {}): SpanCosts {
  const [input, cached, cacheWrite, output, reasoning, webSearch, total] = c;
  return {
    input_cost: input,
    output_cost: output,
    reasoning_cost: reasoning,
    cached_input_cost: cached,
    cache_write_input_cost: cacheWrite,
    image_cost: '0',
    web_search_cost: webSearch,
    request_cost: '0',
    total_cost: total,
    priced: true,
    price_source: source,
    ...extra,
  };
}

const STD: Usage = { inputTokens: 12_345, cachedInputTokens: 6_000, cacheWriteInputTokens: 2_000, outputTokens: 789, reasoningTokens: 321, totalTokens: 21_455, webSearchCount: 2 };
const EMBED: Usage = { inputTokens: 12_345, totalTokens: 12_345 };

/**
 * Public list prices (USD per 1M tokens; web search per call) and the costs
 * they give for the usage, worked out by hand: count × price / 10^6 per
 * dimension. A price in parentheses in a comment is a fallback: cache reads
 * and writes at the input price where the provider has no cache price,
 * reasoning at the output price.
 */
type Row = [provider: string, model: string, matched: string, usage: Usage, listPrices: [input: string, cached: string, cacheWrite: string, output: string, reasoning: string, webSearchEach: string], expected: Costs];
const GOLDEN: Row[] = [
  // OpenAI: cache writes are billed as input.
  ['openai', 'gpt-4o', 'gpt-4o', STD, ['2.5', '1.25', '2.5', '10', '10', '0.01'], ['0.0308625', '0.0075', '0.005', '0.00789', '0.00321', '0.02', '0.0744625']],
  ['openai', 'gpt-4o-mini', 'gpt-4o-mini', STD, ['0.15', '0.075', '0.15', '0.6', '0.6', '0.01'], ['0.00185175', '0.00045', '0.0003', '0.0004734', '0.0001926', '0.02', '0.02326775']],
  ['openai', 'gpt-4.1', 'gpt-4.1', STD, ['2', '0.5', '2', '8', '8', '0.01'], ['0.02469', '0.003', '0.004', '0.006312', '0.002568', '0.02', '0.06057']],
  ['openai', 'gpt-4.1-mini', 'gpt-4.1-mini', STD, ['0.4', '0.1', '0.4', '1.6', '1.6', '0.01'], ['0.004938', '0.0006', '0.0008', '0.0012624', '0.0005136', '0.02', '0.028114']],
  ['openai', 'o4-mini', 'o4-mini', STD, ['1.1', '0.275', '1.1', '4.4', '4.4', '0.01'], ['0.0135795', '0.00165', '0.0022', '0.0034716', '0.0014124', '0.02', '0.0423135']],
  ['openai', 'gpt-5', 'gpt-5', STD, ['1.25', '0.125', '1.25', '10', '10', '0.01'], ['0.01543125', '0.00075', '0.0025', '0.00789', '0.00321', '0.02', '0.04978125']],
  ['openai', 'gpt-5-mini', 'gpt-5-mini', STD, ['0.25', '0.025', '0.25', '2', '2', '0.01'], ['0.00308625', '0.00015', '0.0005', '0.001578', '0.000642', '0.02', '0.02595625']],
  ['openai', 'o3', 'o3', STD, ['2', '0.5', '2', '8', '8', '0.01'], ['0.02469', '0.003', '0.004', '0.006312', '0.002568', '0.02', '0.06057']],
  // Embeddings: input only.
  ['openai', 'text-embedding-3-small', 'text-embedding-3-small', EMBED, ['0.02', '0.02', '0.02', '0', '0', '0'], ['0.0002469', '0', '0', '0', '0', '0', '0.0002469']],
  ['openai', 'text-embedding-3-large', 'text-embedding-3-large', EMBED, ['0.13', '0.13', '0.13', '0', '0', '0'], ['0.00160485', '0', '0', '0', '0', '0', '0.00160485']],
  ['mistral', 'mistral-embed', 'mistral-embed', EMBED, ['0.1', '0.1', '0.1', '0.1', '0.1', '0'], ['0.0012345', '0', '0', '0', '0', '0', '0.0012345']],
  ['voyageai', 'voyage-3', 'voyage-3', EMBED, ['0.06', '0.06', '0.06', '0', '0', '0'], ['0.0007407', '0', '0', '0', '0', '0', '0.0007407']],
  ['voyageai', 'voyage-3-large', 'voyage-3-large', EMBED, ['0.18', '0.18', '0.18', '0', '0', '0'], ['0.0022221', '0', '0', '0', '0', '0', '0.0022221']],
  // Anthropic: cache writes (5-minute) at 1.25× input, reads at 0.1× input.
  ['anthropic', 'claude-sonnet-4-20250514', 'claude-sonnet-4-0', STD, ['3', '0.3', '3.75', '15', '15', '0.01'], ['0.037035', '0.0018', '0.0075', '0.011835', '0.004815', '0.02', '0.082985']],
  ['anthropic', 'claude-opus-4-20250514', 'claude-opus-4-0', STD, ['15', '1.5', '18.75', '75', '75', '0.01'], ['0.185175', '0.009', '0.0375', '0.059175', '0.024075', '0.02', '0.334925']],
  ['anthropic', 'claude-3-5-haiku-20241022', 'claude-3-5-haiku-latest', STD, ['0.8', '0.08', '1', '4', '4', '0.01'], ['0.009876', '0.00048', '0.002', '0.003156', '0.001284', '0.02', '0.036796']],
  ['anthropic', 'claude-3-7-sonnet-20250219', 'claude-3-7-sonnet-latest', STD, ['3', '0.3', '3.75', '15', '15', '0.01'], ['0.037035', '0.0018', '0.0075', '0.011835', '0.004815', '0.02', '0.082985']],
  // Google: no web search price in the catalog.
  ['google', 'gemini-2.5-pro', 'gemini-2.5-pro', STD, ['1.25', '0.125', '1.25', '10', '10', '0'], ['0.01543125', '0.00075', '0.0025', '0.00789', '0.00321', '0', '0.02978125']],
  ['google', 'gemini-2.5-flash', 'gemini-2.5-flash', STD, ['0.3', '0.03', '0.3', '2.5', '2.5', '0'], ['0.0037035', '0.00018', '0.0006', '0.0019725', '0.0008025', '0', '0.0072585']],
  ['google', 'gemini-2.0-flash', 'gemini-2.0-flash', STD, ['0.1', '0.025', '0.1', '0.4', '0.4', '0'], ['0.0012345', '0.00015', '0.0002', '0.0003156', '0.0001284', '0', '0.0020285']],
  // Mistral: no cache prices, so cached tokens are plain input.
  ['mistral', 'mistral-large-latest', 'mistral-large', STD, ['2', '2', '2', '6', '6', '0'], ['0.02469', '0.012', '0.004', '0.004734', '0.001926', '0', '0.04735']],
  ['mistral', 'mistral-small-latest', 'mistral-small-latest', STD, ['0.1', '0.1', '0.1', '0.3', '0.3', '0'], ['0.0012345', '0.0006', '0.0002', '0.0002367', '0.0000963', '0', '0.0023675']],
  ['mistral', 'codestral-latest', 'codestral', STD, ['0.3', '0.3', '0.3', '0.9', '0.9', '0'], ['0.0037035', '0.0018', '0.0006', '0.0007101', '0.0002889', '0', '0.0071025']],
  // DeepSeek, standard hours (00:30–16:30 UTC).
  ['deepseek', 'deepseek-chat', 'deepseek-chat', STD, ['0.27', '0.07', '0.27', '1.1', '1.1', '0'], ['0.00333315', '0.00042', '0.00054', '0.0008679', '0.0003531', '0', '0.00551415']],
  ['deepseek', 'deepseek-reasoner', 'deepseek-reasoner', STD, ['0.55', '0.14', '0.55', '2.19', '2.19', '0'], ['0.00678975', '0.00084', '0.0011', '0.00172791', '0.00070299', '0', '0.01116065']],
  // xAI
  ['x-ai', 'grok-3', 'grok-3', STD, ['3', '0.75', '3', '15', '15', '0'], ['0.037035', '0.0045', '0.006', '0.011835', '0.004815', '0', '0.064185']],
  ['x-ai', 'grok-3-mini', 'grok-3-mini', STD, ['0.3', '0.075', '0.3', '0.5', '0.5', '0'], ['0.0037035', '0.00045', '0.0006', '0.0003945', '0.0001605', '0', '0.0053085']],
  ['x-ai', 'grok-4', 'grok-4-0709', STD, ['3', '0.75', '3', '15', '15', '0'], ['0.037035', '0.0045', '0.006', '0.011835', '0.004815', '0', '0.064185']],
  // Cohere
  ['cohere', 'command-r-plus', 'command-r-plus', STD, ['2.5', '2.5', '2.5', '10', '10', '0'], ['0.0308625', '0.015', '0.005', '0.00789', '0.00321', '0', '0.0619625']],
  ['cohere', 'command-r', 'command-r', STD, ['0.15', '0.15', '0.15', '0.6', '0.6', '0'], ['0.00185175', '0.0009', '0.0003', '0.0004734', '0.0001926', '0', '0.00371775']],
  ['cohere', 'command-a-03-2025', 'command-a', STD, ['2.5', '2.5', '2.5', '10', '10', '0'], ['0.0308625', '0.015', '0.005', '0.00789', '0.00321', '0', '0.0619625']],
  ['cohere', 'command-r7b-12-2024', 'command-r7b', STD, ['0.0375', '0.0375', '0.0375', '0.15', '0.15', '0'], ['0.0004629375', '0.000225', '0.000075', '0.00011835', '0.00004815', '0', '0.0009294375']],
  // Meta's Llama on Groq
  ['groq', 'llama-3.3-70b-versatile', 'llama-3.3-70b-versatile', STD, ['0.59', '0.59', '0.59', '0.79', '0.79', '0'], ['0.00728355', '0.00354', '0.00118', '0.00062331', '0.00025359', '0', '0.01288045']],
  ['groq', 'llama-3.1-8b-instant', 'llama-3.1-8b-instant', STD, ['0.05', '0.05', '0.05', '0.08', '0.08', '0'], ['0.00061725', '0.0003', '0.0001', '0.00006312', '0.00002568', '0', '0.00110605']],
  ['groq', 'meta-llama/llama-4-scout-17b-16e-instruct', 'meta-llama/llama-4-scout-17b-16e-instruct', STD, ['0.11', '0.11', '0.11', '0.34', '0.34', '0'], ['0.00135795', '0.00066', '0.00022', '0.00026826', '0.00010914', '0', '0.00261535']],
];

describe('golden list prices', () => {
  it('covers at least 25 models', () => {
    expect(new Set(GOLDEN.map((r) => r[2])).size).toBeGreaterThanOrEqual(25);
  });

  it.each(GOLDEN)('%s %s', (provider, model, matched, usage, list, expected) => {
    expect(engine.price(span(provider, model, usage), 'org-a')).toEqual(costs(expected));
    const q = engine.quote({ orgId: 'org-a', provider, model, at: T });
    expect(q?.model).toBe(matched);
    expect(q?.source).toBe(CATALOG);
    const p = q?.prices;
    expect([p?.inputPerMtok, p?.cachedInputPerMtok, p?.cacheWriteInputPerMtok, p?.outputPerMtok, p?.reasoningPerMtok, p?.webSearchEach]).toEqual(list);
  });

  it('records every fallback it takes', () => {
    expect(engine.quote({ orgId: 'o', provider: 'openai', model: 'gpt-4o', at: T })?.prices.fallbacks).toEqual({
      cacheWriteInputPerMtok: 'input',
      reasoningPerMtok: 'output',
      imageEach: 'none',
      requestEach: 'none',
    });
    expect(engine.quote({ orgId: 'o', provider: 'anthropic', model: 'claude-sonnet-4-20250514', at: T })?.prices.fallbacks).toEqual({
      reasoningPerMtok: 'output',
      imageEach: 'none',
      requestEach: 'none',
    });
    expect(engine.quote({ orgId: 'o', provider: 'mistral', model: 'mistral-large-latest', at: T })?.prices.fallbacks).toEqual({
      cachedInputPerMtok: 'input',
      cacheWriteInputPerMtok: 'input',
      reasoningPerMtok: 'output',
      imageEach: 'none',
      webSearchEach: 'none',
      requestEach: 'none',
    });
  });

  it('prices requests per request (Perplexity sonar: $12 per 1000 requests)', () => {
    const c = engine.price(span('perplexity', 'sonar', { inputTokens: 1000, outputTokens: 500, requestCount: 3 }), 'o');
    // 1000 × $1/1M, 500 × $1/1M, 3 × $0.012
    expect([c.input_cost, c.output_cost, c.request_cost, c.total_cost]).toEqual(['0.001', '0.0005', '0.036', '0.0375']);
  });
});

describe('long-context tiers (gemini-2.5-pro: above 200k input tokens the whole request is priced higher)', () => {
  // 150k uncached + 40k cache reads + 10k cache writes = 200k input tokens in total.
  const atLimit: Usage = { inputTokens: 150_000, cachedInputTokens: 40_000, cacheWriteInputTokens: 10_000, outputTokens: 1000, reasoningTokens: 500 };

  it('stays on the base tier at exactly 200k input tokens', () => {
    // 150000 × 1.25, 40000 × 0.125, 10000 × 1.25 (no write price), 1000 × 10, 500 × 10 (reasoning at output)
    expect(engine.price(span('google', 'gemini-2.5-pro', atLimit), 'o')).toEqual(costs(['0.1875', '0.005', '0.0125', '0.01', '0.005', '0', '0.22']));
    expect(engine.quote({ orgId: 'o', provider: 'google', model: 'gemini-2.5-pro', at: T, usage: atLimit })?.tier).toBe('input tokens <= 200000');
  });

  it('chooses the tier on the total input, and prices every dimension at it', () => {
    // Uncached input alone (150,001) is below 200k; the total (200,001) is above.
    const over = { ...atLimit, inputTokens: 150_001 };
    // 150001 × 2.5, 40000 × 0.25, 10000 × 2.5, 1000 × 15, 500 × 15
    expect(engine.price(span('google', 'gemini-2.5-pro', over), 'o')).toEqual(costs(['0.3750025', '0.01', '0.025', '0.015', '0.0075', '0', '0.4325025']));
    const q = engine.quote({ orgId: 'o', provider: 'google', model: 'gemini-2.5-pro', at: T, usage: over });
    expect(q?.tier).toBe('input tokens > 200000');
    expect([q?.prices.inputPerMtok, q?.prices.cachedInputPerMtok, q?.prices.outputPerMtok]).toEqual(['2.5', '0.25', '15']);
  });

  it('tiers by 128k for gemini-1.5-pro', () => {
    const c = engine.price(span('google', 'gemini-1.5-pro', { inputTokens: 128_001, outputTokens: 1000 }), 'o');
    // 128001 × 2.5, 1000 × 10
    expect([c.input_cost, c.output_cost, c.total_cost]).toEqual(['0.3200025', '0.01', '0.3300025']);
  });
});

describe('prices in force at the span start', () => {
  const u: Usage = { inputTokens: 1000, outputTokens: 1000 };

  it('applies the o3 price cut of 2025-06-10 ($10/$40 → $2/$8)', () => {
    const before = engine.price(span('openai', 'o3', u, Date.UTC(2025, 5, 9, 23, 59, 59, 999)), 'o');
    const after = engine.price(span('openai', 'o3', u, Date.UTC(2025, 5, 10)), 'o');
    expect([before.input_cost, before.output_cost, before.total_cost]).toEqual(['0.01', '0.04', '0.05']);
    expect([after.input_cost, after.output_cost, after.total_cost]).toEqual(['0.002', '0.008', '0.01']);
  });

  it('applies DeepSeek off-peak prices from 16:30 UTC', () => {
    const peak = engine.price(span('deepseek', 'deepseek-chat', STD, Date.UTC(2025, 8, 1, 16, 29, 59, 999)), 'o');
    const offPeak = engine.price(span('deepseek', 'deepseek-chat', STD, Date.UTC(2025, 8, 1, 16, 30)), 'o');
    expect(peak.total_cost).toBe('0.00551415');
    // Off-peak: 0.135 input, 0.035 cached, 0.55 output.
    expect(offPeak).toEqual(costs(['0.001666575', '0.00021', '0.00027', '0.00043395', '0.00017655', '0', '0.002757075']));
  });
});

describe('model names', () => {
  it.each<[string | undefined, string, string, string]>([
    [undefined, 'gpt-4o', 'openai', 'gpt-4o'],
    ['openai', 'gpt-4o-2024-08-06', 'openai', 'gpt-4o'],
    [undefined, 'openai/gpt-4o', 'openai', 'gpt-4o'],
    ['openai', 'openai/gpt-4o', 'openai', 'gpt-4o'],
    ['OpenAI', ' GPT-4o ', 'openai', 'gpt-4o'],
    [undefined, 'claude-sonnet-4-20250514', 'anthropic', 'claude-sonnet-4-0'],
    [undefined, 'anthropic/claude-sonnet-4-20250514', 'anthropic', 'claude-sonnet-4-0'],
    [undefined, 'text-embedding-3-small', 'openai', 'text-embedding-3-small'],
    ['x_ai', 'grok-4', 'x-ai', 'grok-4-0709'],
    ['xai', 'grok-3', 'x-ai', 'grok-3'],
    ['gcp.gen_ai', 'gemini-2.5-pro', 'google', 'gemini-2.5-pro'],
    ['gcp.vertex_ai', 'gemini-2.5-flash', 'google', 'gemini-2.5-flash'],
    ['vertex_ai', 'gemini-2.0-flash', 'google', 'gemini-2.0-flash'],
    ['azure.ai.inference', 'gpt-4o', 'azure', 'gpt-4o'],
    ['aws.bedrock', 'us.anthropic.claude-sonnet-4-20250514-v1:0', 'aws', 'regional.anthropic.claude-sonnet-4-20250514-v1:0'],
    ['mistral_ai', 'mistral-large-latest', 'mistral', 'mistral-large'],
    ['some-gateway', 'gpt-4o-mini', 'openai', 'gpt-4o-mini'],
  ])('%s %j → %s/%s', (provider, model, wantProvider, wantModel) => {
    const q = engine.quote({ orgId: 'o', provider, model, at: T });
    expect([q?.provider, q?.model]).toEqual([wantProvider, wantModel]);
    expect(engine.price(span(provider, model, { inputTokens: 10 }), 'o').priced).toBe(true);
  });

  it.each<[string | undefined, string | undefined]>([
    [undefined, undefined],
    [undefined, ''],
    [undefined, '   '],
    [undefined, 'my-private-finetune'],
    ['openai', 'no-such-model'],
    // A known host that does not list the model: no guess at another host's rate.
    ['groq', 'gpt-4o'],
    // An open-weight model without a host has no single price.
    [undefined, 'llama-3.3-70b-versatile'],
  ])('leaves %s %j unpriced', (provider, model) => {
    expect(engine.price(span(provider, model, STD), 'o')).toEqual(UNPRICED);
    if (model !== undefined) expect(engine.quote({ orgId: 'o', provider, model, at: T })).toBeNull();
  });

  it('prices a span with a model and no usage at zero, as priced', () => {
    expect(engine.price(span('openai', 'gpt-4o'), 'o')).toEqual(costs(['0', '0', '0', '0', '0', '0', '0']));
  });

  it('matches the library on every catalog model it matches (by id, with and without the provider)', async () => {
    const data = (await waitForUpdate()) as Provider[];
    const mismatches: string[] = [];
    for (const p of data) {
      for (const m of p.models) {
        for (const providerId of [p.id, undefined]) {
          let lib: ReturnType<typeof calcPrice> = null;
          try {
            lib = calcPrice({ input_tokens: 1 }, m.id, { ...(providerId === undefined ? {} : { providerId }), timestamp: new Date(T) });
          } catch {
            lib = null;
          }
          if (lib === null) continue;
          const ours = engine.quote({ orgId: 'o', provider: providerId, model: m.id, at: T });
          if (ours?.provider !== lib.provider.id || ours.model !== lib.model.id) mismatches.push(`${providerId ?? '-'} ${m.id}: ${lib.provider.id}/${lib.model.id} vs ${ours?.provider}/${ours?.model}`);
        }
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('agrees with the library’s float totals on the golden rows, to float precision', () => {
    for (const [provider, model, , usage] of GOLDEN) {
      const u = { ...usage, webSearchCount: 0 };
      const ours = Number(engine.price(span(provider, model, u), 'o').total_cost);
      const lib = calcPrice(
        {
          // The library counts cache reads and writes inside input, reasoning inside output.
          input_tokens: (u.inputTokens ?? 0) + (u.cachedInputTokens ?? 0) + (u.cacheWriteInputTokens ?? 0),
          cache_read_tokens: u.cachedInputTokens ?? 0,
          cache_write_tokens: u.cacheWriteInputTokens ?? 0,
          output_tokens: (u.outputTokens ?? 0) + (u.reasoningTokens ?? 0),
        },
        model,
        { providerId: provider, timestamp: new Date(T) },
      );
      expect(lib, `${provider} ${model}`).not.toBeNull();
      expect(Math.abs(ours - (lib?.total_price ?? 0)), `${provider} ${model}`).toBeLessThan(1e-12);
    }
  });
});

function override(o: Partial<PriceOverride> & Pick<PriceOverride, 'id' | 'model'>): PriceOverride {
  return {
    orgId: '',
    provider: '',
    validFrom: 0,
    inputPerMtok: '1',
    outputPerMtok: '2',
    cachedInputPerMtok: null,
    cacheWriteInputPerMtok: null,
    reasoningPerMtok: null,
    imageEach: null,
    webSearchEach: null,
    requestEach: null,
    ...o,
  };
}

describe('overrides', () => {
  const u: Usage = { inputTokens: 1000, cachedInputTokens: 1000, outputTokens: 1000 };

  it('org override > global override > catalog', () => {
    const e = new PriceEngine({
      overrides: [
        override({ id: 'g1', model: 'gpt-4o', inputPerMtok: '2', outputPerMtok: '8' }),
        override({ id: 'o1', orgId: 'acme', model: 'gpt-4o', inputPerMtok: '1', outputPerMtok: '4', cachedInputPerMtok: '0.5' }),
      ],
    });
    // acme: 1000 × 1, 1000 × 0.5, 1000 × 4
    expect(e.price(span('openai', 'gpt-4o', u), 'acme')).toMatchObject({ input_cost: '0.001', cached_input_cost: '0.0005', output_cost: '0.004', total_cost: '0.0055', price_source: 'override:o1:org' });
    // other orgs: 1000 × 2, 1000 × 2 (cache reads fall back to input), 1000 × 8
    expect(e.price(span('openai', 'gpt-4o', u), 'other')).toMatchObject({ input_cost: '0.002', cached_input_cost: '0.002', output_cost: '0.008', total_cost: '0.012', price_source: 'override:g1:global' });
    expect(e.quote({ orgId: 'other', provider: 'openai', model: 'gpt-4o', at: T })?.prices.fallbacks).toMatchObject({ cachedInputPerMtok: 'input', reasoningPerMtok: 'output' });
    e.setOverrides([]);
    // catalog: 1000 × 2.5, 1000 × 1.25, 1000 × 10
    expect(e.price(span('openai', 'gpt-4o', u), 'acme')).toMatchObject({ total_cost: '0.01375', price_source: CATALOG });
  });

  it('keeps an org override in force over a newer global one', () => {
    const e = new PriceEngine({
      overrides: [override({ id: 'o1', orgId: 'acme', model: 'gpt-4o', validFrom: 0 }), override({ id: 'g2', model: 'gpt-4o', validFrom: T - 1000 })],
    });
    expect(e.price(span('openai', 'gpt-4o', u), 'acme').price_source).toBe('override:o1:org');
  });

  it('applies to name variants of the model and to unpriced models', () => {
    const e = new PriceEngine({ overrides: [override({ id: 'g1', model: 'gpt-4o' }), override({ id: 'g2', model: 'My-Finetune', inputPerMtok: '0.3', outputPerMtok: '1.2' })] });
    for (const [p, m] of [['openai', 'gpt-4o-2024-08-06'], [undefined, 'openai/gpt-4o'], [undefined, 'gpt-4o']] as const) {
      expect(e.quote({ orgId: 'o', provider: p, model: m, at: T })?.source).toBe('override:g1:global');
    }
    // 1000 × 0.3, 1000 × 0.3, 1000 × 1.2
    expect(e.price(span(undefined, 'my-finetune', u), 'o')).toMatchObject({ total_cost: '0.0018', priced: true, price_source: 'override:g2:global' });
  });

  it('restricts a provider-specific override to that provider (aliases included)', () => {
    const e = new PriceEngine({ overrides: [override({ id: 'x', provider: 'x-ai', model: 'grok-3' }), override({ id: 'any', model: 'grok-3', inputPerMtok: '5' })] });
    expect(e.price(span('x_ai', 'grok-3', u), 'o').price_source).toBe('override:x:global');
    expect(e.price(span('azure', 'grok-3', u), 'o').price_source).toBe('override:any:global');
  });

  it('follows validFrom history, also inside one 30-minute bucket', () => {
    const july = Date.UTC(2025, 6, 1);
    const midBucket = july + 10 * 60_000;
    const e = new PriceEngine({
      overrides: [
        override({ id: 'v1', model: 'custom-llm', validFrom: 0, inputPerMtok: '1' }),
        override({ id: 'v2', model: 'custom-llm', validFrom: july, inputPerMtok: '3' }),
        override({ id: 'v3', model: 'custom-llm', validFrom: midBucket, inputPerMtok: '4' }),
        override({ id: 'future', model: 'custom-llm', validFrom: Date.UTC(2030, 0, 1), inputPerMtok: '9' }),
      ],
    });
    const src = (at: number) => e.price(span(undefined, 'custom-llm', { inputTokens: 1000 }, at), 'o');
    expect(src(july - 1)).toMatchObject({ input_cost: '0.001', price_source: 'override:v1:global' });
    expect(src(july + 5 * 60_000)).toMatchObject({ input_cost: '0.003', price_source: 'override:v2:global' });
    expect(src(midBucket)).toMatchObject({ input_cost: '0.004', price_source: 'override:v3:global' });
    expect(src(july + 5 * 60_000).price_source).toBe('override:v2:global');
    expect(e.quote({ orgId: 'o', model: 'custom-llm', at: T })?.source).toBe('override:v3:global');
  });

  it('prices images, web searches and requests each', () => {
    const e = new PriceEngine({ overrides: [override({ id: 'img', model: 'image-gen', inputPerMtok: '0', outputPerMtok: '0', imageEach: '0.04', webSearchEach: '0.025', requestEach: '0.001' })] });
    expect(e.price(span(undefined, 'image-gen', { imageCount: 3, webSearchCount: 2, requestCount: 5 }), 'o')).toMatchObject({
      image_cost: '0.12',
      web_search_cost: '0.05',
      request_cost: '0.005',
      total_cost: '0.175',
    });
  });

  it('drops cached resolutions when overrides change', () => {
    const e = new PriceEngine();
    expect(e.price(span('openai', 'gpt-4o', u), 'o').price_source).toBe(CATALOG);
    e.setOverrides([override({ id: 'g1', model: 'gpt-4o' })]);
    expect(e.price(span('openai', 'gpt-4o', u), 'o').price_source).toBe('override:g1:global');
  });

  it('rejects an override with a bad price', () => {
    expect(() => new PriceEngine({ overrides: [override({ id: 'bad', model: 'm', inputPerMtok: '1,5' })] })).toThrow(/price override bad: inputPerMtok: not a decimal number/);
    expect(() => new PriceEngine({ overrides: [override({ id: 'neg', model: 'm', outputPerMtok: '-1' })] })).toThrow(/price override neg: outputPerMtok must not be negative/);
  });
});

describe('PRICE_CATALOG_FILE', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'price-catalog-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, content: string): string => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, content);
    return file;
  };
  const data = [
    {
      id: 'acme-cloud',
      name: 'Acme Cloud',
      api_pattern: 'https://api\\.acme\\.example',
      provider_match: { contains: 'acme' },
      model_match: { starts_with: 'acme-' },
      models: [
        {
          id: 'acme-1',
          match: { or: [{ equals: 'acme-1' }, { starts_with: 'acme-1-' }] },
          prices: [
            { prices: { input_mtok: 1, output_mtok: 2 } },
            { constraint: { start_date: '2026-01-01', type: 'start_date' }, prices: { input_mtok: { base: 0.5, tiers: [{ start: 1000, price: 0.75 }] }, output_mtok: 1.5, cache_read_mtok: 0.05, requests_kcount: 5 } },
          ],
        },
      ],
    },
  ];

  it('replaces the built-in catalog, with history and tiers, without touching other engines', () => {
    const e = new PriceEngine({ catalogFile: write('catalog.json', JSON.stringify(data)) });
    expect(e.catalogVersion).toMatch(/^file:catalog\.json@sha256:[0-9a-f]{12}$/);
    const source = `catalog:${e.catalogVersion}`;
    const u: Usage = { inputTokens: 800, cachedInputTokens: 100, outputTokens: 100, requestCount: 2 };
    // Before 2026: 800 × 1, 100 × 1 (no cache price yet), 100 × 2
    expect(e.price(span('acme.cloud', 'acme-1-2025', u, Date.UTC(2025, 11, 31, 23, 59)), 'o')).toMatchObject({ input_cost: '0.0008', cached_input_cost: '0.0001', output_cost: '0.0002', request_cost: '0', total_cost: '0.0011', price_source: source });
    // 2026, 900 input tokens: 800 × 0.5, 100 × 0.05, 100 × 1.5, 2 × $5/1000
    expect(e.price(span(undefined, 'acme-1', u, Date.UTC(2026, 0, 1)), 'o')).toMatchObject({ input_cost: '0.0004', cached_input_cost: '0.000005', output_cost: '0.00015', request_cost: '0.01', total_cost: '0.010555' });
    // 2026, 1050 input tokens: above the tier, 950 × 0.75
    expect(e.price(span(undefined, 'acme-1', { ...u, inputTokens: 950 }, Date.UTC(2026, 0, 1)), 'o')).toMatchObject({ input_cost: '0.0007125', total_cost: '0.0108675' });
    expect(e.price(span('openai', 'gpt-4o', u), 'o')).toEqual(UNPRICED);
    expect(new PriceEngine().price(span('openai', 'gpt-4o', { inputTokens: 1000 }), 'o').input_cost).toBe('0.0025');
  });

  it('says clearly when the file is unreadable or malformed', () => {
    expect(() => new PriceEngine({ catalogFile: path.join(dir, 'missing.json') })).toThrow(/PRICE_CATALOG_FILE .*missing\.json: cannot read it/);
    expect(() => new PriceEngine({ catalogFile: write('bad.json', '{"providers": [') })).toThrow(/PRICE_CATALOG_FILE .*bad\.json: not JSON/);
    expect(() => new PriceEngine({ catalogFile: write('obj.json', '{}') })).toThrow(/not a genai-prices data file: providers: expected a non-empty array of providers/);
    const badPrice = structuredClone(data) as unknown as { models: { prices: { prices: Record<string, unknown> }[] }[] }[];
    (badPrice[0]?.models[0]?.prices[0] as { prices: Record<string, unknown> }).prices.input_mtok = '1.5';
    expect(() => new PriceEngine({ catalogFile: write('price.json', JSON.stringify(badPrice)) })).toThrow(/providers\[0\]\.models\[0\]\.prices\[0\]\.prices\.input_mtok: expected a non-negative number/);
    const badRule = [{ id: 'p', models: [{ id: 'm', match: { glob: 'm*' }, prices: { input_mtok: 1 } }] }];
    expect(() => new PriceEngine({ catalogFile: write('rule.json', JSON.stringify(badRule)) })).toThrow(/providers\[0\]\.models\[0\]\.match: unknown match rule "glob"/);
  });
});

describe('costsFor', () => {
  const prices: UnitPrices = {
    inputPerMtok: '3',
    outputPerMtok: '15',
    cachedInputPerMtok: '0.3',
    cacheWriteInputPerMtok: '3.75',
    reasoningPerMtok: '15',
    imageEach: '0.04',
    webSearchEach: '0.01',
    requestEach: '0',
    fallbacks: {},
  };

  it('prices each dimension independently and totals them exactly', () => {
    // 1 × 3, 2 × 0.3, 3 × 3.75, 4 × 15, 5 × 15 per 1M; 1 × 0.04; 1 × 0.01
    const c = costsFor({ inputTokens: 1, cachedInputTokens: 2, cacheWriteInputTokens: 3, outputTokens: 4, reasoningTokens: 5, imageCount: 1, webSearchCount: 1, totalTokens: 999 }, prices, 'test');
    expect(c).toEqual({
      input_cost: '0.000003',
      cached_input_cost: '0.0000006',
      cache_write_input_cost: '0.00001125',
      output_cost: '0.00006',
      reasoning_cost: '0.000075',
      image_cost: '0.04',
      web_search_cost: '0.01',
      request_cost: '0',
      total_cost: '0.05014985',
      priced: true,
      price_source: 'test',
    });
  });

  it('sums 10^6 priced spans exactly', () => {
    const e = new PriceEngine();
    const s = span('openai', 'gpt-4o-mini', { inputTokens: 1234, cachedInputTokens: 100, outputTokens: 56 });
    let total = 0n;
    let float = 0;
    for (let i = 0; i < 1_000_000; i++) {
      const c = e.price(s, 'o');
      total += parseDecimal(c.total_cost);
      float += Number(c.total_cost);
    }
    // Per span: 1234 × 0.15 + 100 × 0.075 + 56 × 0.6 per 1M = 0.0001851 + 0.0000075 + 0.0000336 = 0.0002262
    expect(formatDecimal(total)).toBe('226.2');
    expect(float).not.toBe(226.2);
  });
});
