import { describe, expect, it } from 'vitest';
import { bedrockProfile, looksLikeBedrock, normalizeServiceTier, pricingRegion, regionOf, serviceTierOf } from './billing-mode.js';

describe('how a span was billed, as stored', () => {
  it("names the standard tier once, whatever the provider calls it, and a batch call's tier batch", () => {
    for (const t of ['default', 'auto', 'standard', 'STANDARD', 'on_demand', 'ON_DEMAND', 'standard_only']) expect(normalizeServiceTier(t), t).toBe('standard');
    expect(normalizeServiceTier('ON_DEMAND_FLEX')).toBe('flex');
    expect(normalizeServiceTier('ON_DEMAND_PRIORITY')).toBe('priority');
    expect(normalizeServiceTier('PROVISIONED_THROUGHPUT')).toBe('provisioned');
    expect(normalizeServiceTier('Scale')).toBe('scale');
    expect(normalizeServiceTier(undefined)).toBe('');
    expect(serviceTierOf({ serviceTier: 'default', batch: true })).toBe('batch');
    expect(serviceTierOf({ batch: false })).toBe('');
  });

  it("takes a Bedrock call's geography from the inference profile in its model id", () => {
    expect(bedrockProfile('us.anthropic.claude-sonnet-4-5-20250929-v1:0')).toBe('us');
    expect(bedrockProfile('global.anthropic.claude-sonnet-4-5-20250929-v1:0')).toBe('global');
    expect(bedrockProfile('us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0')).toBe('us-gov');
    expect(bedrockProfile('arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-sonnet-4-5-20250929-v1:0')).toBe('eu');
    expect(bedrockProfile('anthropic.claude-sonnet-4-5-20250929-v1:0')).toBeUndefined();
    expect(regionOf({ provider: 'aws.bedrock', modelId: 'apac.anthropic.claude-sonnet-4-20250514-v1:0' })).toBe('apac');
    expect(regionOf({ modelId: 'jp.anthropic.claude-sonnet-4-5-20250929-v1:0' })).toBe('jp');
    // A region the span reports wins; other providers' ids are not read.
    expect(regionOf({ provider: 'aws.bedrock', modelId: 'us.anthropic.claude-x-v1:0', region: 'US-EAST-1' })).toBe('us-east-1');
    expect(regionOf({ provider: 'openai', modelId: 'us.some-model' })).toBe('');
    expect(looksLikeBedrock('meta.llama3-1-70b-instruct-v1:0')).toBe(true);
    expect(looksLikeBedrock('gpt-4o')).toBe(false);
  });

  it('prices by region where the cloud bills by it', () => {
    expect(pricingRegion('anthropic', 'anthropic', 'us')).toBe('us');
    expect(pricingRegion('anthropic', 'anthropic', 'global')).toBe('');
    expect(pricingRegion('google-vertex', 'google', 'europe-west1')).toBe('regional');
    expect(pricingRegion('google-vertex', 'google', 'global')).toBe('');
    expect(pricingRegion('aws', 'aws', 'us')).toBe('');
    expect(pricingRegion('mistral', 'mistral', 'eu')).toBe('');
  });
});
