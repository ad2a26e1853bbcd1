import { describe, expect, it } from 'vitest';
import { PriceEngine } from './price-engine.js';
import { auditPrices, bundledSecondCatalog, entryTarget, perMillion, secondPrices } from './price-audit.js';

describe('price audit against the second catalog', () => {
  it('turns per-token floats into exact USD per million tokens', () => {
    expect(perMillion(2.8e-7)).toBe('0.28');
    expect(perMillion(2.25e-5)).toBe('22.5');
    expect(perMillion(3.75e-8)).toBe('0.0375');
    expect(perMillion(1.5e-10)).toBe('0.00015');
    expect(perMillion(0)).toBe('0');
  });

  it('reads buckets and long-context tiers, and maps keys onto the catalog', () => {
    const e = {
      litellm_provider: 'anthropic',
      mode: 'chat',
      input_cost_per_token: 3e-6,
      input_cost_per_token_above_200k_tokens: 6e-6,
      cache_read_input_token_cost: 3e-7,
    };
    expect(secondPrices(e).buckets).toEqual({ input: { base: '3', tiers: [{ start: 200_000, price: '6' }] }, 'cache read': { base: '0.3', tiers: [] } });
    expect(entryTarget('deepseek/deepseek-chat', { litellm_provider: 'deepseek' })).toEqual({ provider: 'deepseek', model: 'deepseek-chat' });
    expect(entryTarget('gemini-2.0-flash-001', { litellm_provider: 'vertex_ai-language-models' })).toEqual({
      provider: 'google-vertex',
      model: 'gemini-2.0-flash-001',
    });
    expect(entryTarget('bedrock/us-east-1/anthropic.claude-x', { litellm_provider: 'bedrock' })).toBeUndefined();
    expect(entryTarget('dall-e-3', { litellm_provider: 'openai', mode: 'image_generation' })).toBeUndefined();
  });

  it('matches models as spans name them to the entries of the catalog model they resolve to', async () => {
    const engine = await PriceEngine.create();
    const at = Date.parse('2026-01-15T12:00:00Z');
    const found = auditPrices(engine, bundledSecondCatalog(), { at, only: [{ provider: 'anthropic', model: 'claude-sonnet-4' }] });
    const f = found.find((x) => x.key === 'claude-sonnet-4-20250514');
    expect(f).toMatchObject({ provider: 'anthropic', status: 'differs', seenAs: ['claude-sonnet-4'] });
    expect(f?.diffs).toContainEqual({ bucket: 'input', tier: '> 200000', inForce: '3', second: '6' });
    // Another provider's entries are not compared with it.
    expect(found.every((x) => x.provider === 'anthropic')).toBe(true);
  });
});
