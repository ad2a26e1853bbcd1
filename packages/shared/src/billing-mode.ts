import { normalizeProvider } from './providers.js';
import type { Span } from './schema.js';

/**
 * How a call was billed beyond its token counts: the service tier (standard,
 * flex, priority, batch, ...) and the region it ran in, as a span row stores
 * them and the price engine prices them. Providers spell both their own way;
 * this is the one place that reads those spellings.
 */

/** Tier names providers report for their standard price (OpenAI `default`/`auto`, Anthropic `standard`, Gemini `ON_DEMAND`). */
const STANDARD_TIERS = new Set(['', 'default', 'standard', 'auto', 'standard_only', 'on_demand']);
const TIER_NAMES: Record<string, string> = {
  on_demand_flex: 'flex',
  on_demand_priority: 'priority',
  provisioned_throughput: 'provisioned',
};

/** A reported tier as stored: '' when none was reported, `standard` for the standard price's names, else lower case. */
export function normalizeServiceTier(tier: string | undefined): string {
  if (tier === undefined) return '';
  const t = tier.trim().toLowerCase();
  if (t === '') return '';
  if (STANDARD_TIERS.has(t)) return 'standard';
  return TIER_NAMES[t] ?? t;
}

/** The `service_tier` column of a span: `batch` for a call through a batch API, else its reported tier. */
export function serviceTierOf(span: Pick<Span, 'serviceTier' | 'batch'>): string {
  return span.batch === true ? 'batch' : normalizeServiceTier(span.serviceTier);
}

/** Bedrock's inference-profile prefixes: a geography (`us.`, `eu.`, ...) or the global endpoint. */
const BEDROCK_PROFILE = /^(us-gov|us|eu|apac|jp|au|ca|in|global)\.[a-z0-9-]+\./;

/**
 * The inference profile's geography in a Bedrock model id (`us.anthropic.claude-...`, also inside an
 * ARN or after a `bedrock/` prefix), or undefined for an in-region id.
 */
export function bedrockProfile(modelId: string): string | undefined {
  const last = modelId.slice(modelId.lastIndexOf('/') + 1).toLowerCase();
  return BEDROCK_PROFILE.exec(last)?.[1];
}

/** Whether a model id has Bedrock's shape (`<vendor>.<model>-v1:0`, or a profile prefix): it prices as Bedrock without a provider. */
export function looksLikeBedrock(modelId: string): boolean {
  const last = modelId.slice(modelId.lastIndexOf('/') + 1).toLowerCase();
  return modelId.startsWith('arn:aws:bedrock:') || BEDROCK_PROFILE.test(last) || /^[a-z0-9-]+\.[a-z0-9.-]+-v\d+(:\d+)?$/.test(last);
}

/**
 * The `region` column of a span: the region it reported (lower case), else, for a Bedrock call,
 * the geography of its inference profile in the model id; '' when neither says.
 */
export function regionOf(span: Pick<Span, 'region' | 'modelId' | 'provider'>): string {
  const r = span.region === undefined ? '' : span.region.trim().toLowerCase();
  if (r !== '' || span.modelId === undefined) return r;
  const provider = normalizeProvider(span.provider);
  if (provider !== 'aws' && (provider !== '' || !looksLikeBedrock(span.modelId))) return '';
  return bedrockProfile(span.modelId) ?? '';
}

/**
 * The region a price depends on: Anthropic's US-only inference (`us`; `global` is the standard
 * price), a Vertex AI regional or multi-region endpoint (`regional`; the `global` endpoint is the
 * standard price), OpenAI's data residency (`us`, `eu`). Bedrock's is in the model id, which picks
 * the price itself; other providers do not bill by region. '' for the standard price.
 * `spanProvider` is the span's (normalized), `resolvedProvider` the one whose prices it got.
 */
export function pricingRegion(spanProvider: string, resolvedProvider: string, region: string): string {
  if (region === '' || region === 'global') return '';
  if (spanProvider === 'google-vertex') return 'regional';
  if (resolvedProvider === 'anthropic' || resolvedProvider === 'openai') return region;
  return '';
}
