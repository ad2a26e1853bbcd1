import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeSpan } from '../../../test/factories.js';
import { CATALOG_DIR } from './catalog.js';
import { PriceEngine } from './price-engine.js';
import type { Adoption } from './price-records.js';
import type { Span } from './schema.js';

/**
 * Golden prices of the billing dimensions beyond token counts, priced with
 * what the release ships (the catalog and catalog/adoptions.json) on
 * 2026-11-16, against the providers' list prices (USD per 1M tokens), each
 * page as listed in November 2026:
 * - OpenAI, platform.openai.com/docs/pricing (Standard, Batch, Flex and
 *   Priority tabs; Audio tokens): gpt-realtime text $4 in / $0.40 cached / $16
 *   out, audio $32 in / $0.40 cached / $64 out; gpt-4o-audio-preview audio
 *   $40 in / $80 out; gpt-5 Flex $0.625 / $5 (cached $0.0625), Priority $2.50
 *   / $20; gpt-4o Batch $1.25 / $5 (Standard $2.50 / $10). Data residency
 *   (platform.openai.com/docs/guides/your-data, regional processing): gpt-5.4
 *   +10% in us and eu ($2.75 / $16.50).
 * - Anthropic, platform.claude.com/docs/en/about-claude/pricing (model
 *   pricing, prompt caching, batch processing): Claude Sonnet 4.5 $3 in,
 *   $3.75 5-minute cache write, $6 1-hour cache write, $0.30 cache read, $15
 *   out; Batch half of each ($1.50 / $7.50, 1-hour write $3). US-only
 *   inference (support.claude.com/en/articles/15422948): 1.1x for Opus 4.6
 *   and later ($5.50 / $27.50), standard rates for Sonnet 4.5. Priority Tier
 *   is sold by commitment, with no list price per token.
 * - Google, ai.google.dev/gemini-api/docs/pricing: Gemini 2.5 Flash $0.30
 *   text in, $1.00 audio in, $0.03 cached text, $0.10 cached audio, $2.50 out;
 *   Batch half ($0.15 / $1.25). Gemini 3.6 Flash $1.50 / $7.50, Flex half
 *   ($0.75 / $3.75). Vertex AI, cloud.google.com/vertex-ai/generative-ai/pricing:
 *   Claude Sonnet 4.5 on the global endpoint $3 / $15, regional endpoints
 *   +10% ($3.30 / $16.50); Gemini costs the same on either.
 * - AWS, aws.amazon.com/bedrock/pricing: Claude Sonnet 4.5 global $3 / $15,
 *   geographic and in-region $3.30 / $16.50, batch inference half ($1.65 /
 *   $8.25); Nova Sonic speech $3.40 in / $13.60 out, text $0.06 / $0.24.
 */

const DAY = Date.UTC(2026, 10, 16, 12);
const M = 1_000_000;
// 100k of each: a whole prompt under every long-context threshold (128k and up), so each is a tenth of the list price.
const K = 100_000;
const span = (p: Partial<Span>): Span => makeSpan({ startTime: DAY, endTime: DAY + 1, ...p });

describe('billing dimensions at the release prices', () => {
  let engine: PriceEngine;
  beforeAll(async () => {
    const { adoptions } = JSON.parse(fs.readFileSync(path.join(CATALOG_DIR, 'adoptions.json'), 'utf8')) as { adoptions: Adoption[] };
    engine = await PriceEngine.create({ adoptions });
  });
  const price = (p: Partial<Span>) => engine.price(span(p), 'org');

  it('OpenAI: audio in, out and cached at their own rates', () => {
    const c = price({
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
    });
    // 1000 × 4 + 2000 × 0.40 + 10,000 × 32 + 20,000 × 0.40 + 500 × 16 + 5000 × 64, per million
    expect(c).toMatchObject({
      input_cost: '0.004',
      cached_input_cost: '0.0008',
      audio_input_cost: '0.32',
      cached_audio_input_cost: '0.008',
      output_cost: '0.008',
      audio_output_cost: '0.32',
      total_cost: '0.6608',
      priced: true,
    });
    expect(price({ provider: 'openai', modelId: 'gpt-4o-audio-preview', usage: { audioInputTokens: M, audioOutputTokens: M } })).toMatchObject({
      audio_input_cost: '40',
      audio_output_cost: '80',
    });
  });

  it('OpenAI: flex about half, priority about double, batch half, data residency +10%', () => {
    const usage = { inputTokens: K, cachedInputTokens: K, outputTokens: K };
    expect(price({ provider: 'openai', modelId: 'gpt-5', serviceTier: 'flex', usage })).toMatchObject({
      input_cost: '0.0625',
      cached_input_cost: '0.00625',
      output_cost: '0.5',
    });
    expect(price({ provider: 'openai', modelId: 'gpt-5-2025-08-07', serviceTier: 'priority', usage })).toMatchObject({ input_cost: '0.25', output_cost: '2' });
    expect(price({ provider: 'openai', modelId: 'gpt-5', serviceTier: 'default', usage })).toMatchObject({ input_cost: '0.125', output_cost: '1' });
    expect(price({ provider: 'openai', modelId: 'gpt-4o', batch: true, usage: { inputTokens: K, outputTokens: K } })).toMatchObject({
      input_cost: '0.125',
      output_cost: '0.5',
    });
    expect(price({ provider: 'openai', modelId: 'gpt-5.4', region: 'us', usage: { inputTokens: K, outputTokens: K } })).toMatchObject({
      input_cost: '0.275',
      output_cost: '1.65',
    });
  });

  it('Anthropic: one-hour cache writes at 2x input, five-minute at 1.25x; batch half of every bucket', () => {
    const usage = { inputTokens: 20_000, cacheWriteInputTokens: 20_000, cacheWrite1hInputTokens: 20_000, cachedInputTokens: 20_000, outputTokens: K };
    // 20k × 3 + 20k × 3.75 + 20k × 6 + 20k × 0.30 + 100k × 15, per million
    expect(price({ provider: 'anthropic', modelId: 'claude-sonnet-4-5-20250929', usage })).toMatchObject({
      input_cost: '0.06',
      cache_write_input_cost: '0.075',
      cache_write_1h_input_cost: '0.12',
      cached_input_cost: '0.006',
      output_cost: '1.5',
      total_cost: '1.761',
    });
    expect(price({ provider: 'anthropic', modelId: 'claude-sonnet-4-5-20250929', serviceTier: 'batch', usage })).toMatchObject({
      input_cost: '0.03',
      cache_write_input_cost: '0.0375',
      cache_write_1h_input_cost: '0.06',
      cached_input_cost: '0.003',
      output_cost: '0.75',
      total_cost: '0.8805',
    });
  });

  it('Anthropic: US-only inference at 1.1x from Opus 4.6 on, standard before; priority has no list price', () => {
    const usage = { inputTokens: K, outputTokens: K };
    expect(price({ provider: 'anthropic', modelId: 'claude-opus-4-6', region: 'us', usage })).toMatchObject({ input_cost: '0.55', output_cost: '2.75' });
    expect(price({ provider: 'anthropic', modelId: 'claude-opus-4-6', region: 'global', usage })).toMatchObject({ input_cost: '0.5', output_cost: '2.5' });
    expect(price({ provider: 'anthropic', modelId: 'claude-sonnet-4-5', region: 'us', usage })).toMatchObject({ input_cost: '0.3', output_cost: '1.5' });
    expect(price({ provider: 'anthropic', modelId: 'claude-sonnet-4-5', serviceTier: 'priority', usage })).toMatchObject({ priced: false, total_cost: '0' });
    expect(price({ provider: 'anthropic', modelId: 'claude-sonnet-4-5', region: 'eu', usage })).toMatchObject({ priced: false });
  });

  it('Google: audio and cached audio on the Gemini API, batch half, flex half', () => {
    const c = price({
      provider: 'gcp.gemini',
      modelId: 'gemini-2.5-flash',
      usage: { inputTokens: M, audioInputTokens: M, cachedInputTokens: M, cachedAudioInputTokens: M, outputTokens: M },
    });
    expect(c).toMatchObject({ input_cost: '0.3', audio_input_cost: '1', cached_input_cost: '0.03', cached_audio_input_cost: '0.1', output_cost: '2.5' });
    expect(price({ provider: 'gcp.gemini', modelId: 'gemini-2.5-flash', batch: true, usage: { inputTokens: M, outputTokens: M } })).toMatchObject({
      input_cost: '0.15',
      output_cost: '1.25',
    });
    expect(price({ provider: 'gcp.gemini', modelId: 'gemini-3.6-flash', serviceTier: 'flex', usage: { inputTokens: M, outputTokens: M } })).toMatchObject({
      input_cost: '0.75',
      output_cost: '3.75',
    });
  });

  it('Vertex AI: Claude 10% above global on a regional endpoint, Gemini the same on both', () => {
    const usage = { inputTokens: K, outputTokens: K };
    const sonnet = { provider: 'gcp.vertex_ai', modelId: 'claude-sonnet-4-5@20250929', usage };
    expect(price({ ...sonnet, region: 'global' })).toMatchObject({ input_cost: '0.3', output_cost: '1.5' });
    expect(price({ ...sonnet, region: 'us-east5' })).toMatchObject({ input_cost: '0.33', output_cost: '1.65' });
    expect(price({ ...sonnet, region: 'eu' })).toMatchObject({ input_cost: '0.33', output_cost: '1.65' });
    expect(price({ provider: 'gcp.vertex_ai', modelId: 'gemini-2.5-flash', region: 'us-central1', usage })).toMatchObject({
      input_cost: '0.03',
      output_cost: '0.25',
    });
  });

  it('Bedrock: the inference profile in the model id picks regional or global; batch half; Nova Sonic speech', () => {
    const usage = { inputTokens: K, outputTokens: K };
    for (const model of [
      'us.anthropic.claude-sonnet-4-5-20250929-v1:0',
      'eu.anthropic.claude-sonnet-4-5-20250929-v1:0',
      'anthropic.claude-sonnet-4-5-20250929-v1:0',
    ])
      expect(price({ provider: 'aws.bedrock', modelId: model, usage }), model).toMatchObject({ input_cost: '0.33', output_cost: '1.65' });
    expect(price({ provider: 'aws.bedrock', modelId: 'global.anthropic.claude-sonnet-4-5-20250929-v1:0', usage })).toMatchObject({
      input_cost: '0.3',
      output_cost: '1.5',
    });
    // Without a provider, a Bedrock id still prices as Bedrock.
    expect(price({ modelId: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', usage })).toMatchObject({ input_cost: '0.33', output_cost: '1.65' });
    expect(price({ provider: 'aws.bedrock', modelId: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', batch: true, usage })).toMatchObject({
      input_cost: '0.165',
      output_cost: '0.825',
    });
    expect(
      price({
        provider: 'aws.bedrock',
        modelId: 'amazon.nova-sonic-v1:0',
        usage: { inputTokens: M, outputTokens: M, audioInputTokens: M, audioOutputTokens: M },
      }),
    ).toMatchObject({ input_cost: '0.06', output_cost: '0.24', audio_input_cost: '3.4', audio_output_cost: '13.6' });
  });

  it('leaves a span unpriced when its tier, region or a bucket it uses has no price, never at the standard rate', () => {
    const usage = { inputTokens: M, outputTokens: M };
    // gpt-4o has no flex tier, OpenAI's scale tier no list price, a text model no audio price.
    for (const s of [
      { provider: 'openai', modelId: 'gpt-4o', serviceTier: 'flex', usage },
      { provider: 'openai', modelId: 'gpt-4o', serviceTier: 'scale', usage },
      { provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: M, audioInputTokens: 10 } },
      { provider: 'gcp.vertex_ai', modelId: 'gemini-2.5-flash', serviceTier: 'provisioned_throughput', usage },
    ]) {
      expect(price(s), JSON.stringify(s)).toMatchObject({ priced: false, total_cost: '0', price_source: '' });
      expect(engine.whyUnpriced({ orgId: 'org', provider: s.provider, model: s.modelId, at: DAY, serviceTier: s.serviceTier, usage: s.usage })).toMatch(/^no /);
    }
  });
});
