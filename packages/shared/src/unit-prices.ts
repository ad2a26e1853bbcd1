import { costEach, costPerMillion, formatDecimal, parseDecimal, SCALE_DIGITS } from './decimal.js';
import type { MergedPrices, PriceValue } from './price-records.js';
import { promptTokens, UNPRICED, type CostColumn, type SpanCosts } from './rows.js';
import type { Usage } from './schema.js';

/**
 * Unit prices of one model, one service tier and one region, as exact
 * decimals (BigInt scaled by 10^18), and the costs of a span at them.
 *
 * Token buckets are disjoint and each is priced at its own rate. A bucket
 * without a price of its own falls back visibly where the provider bills it
 * as another (cache reads and writes as input, reasoning as output, cached
 * audio as audio input); audio and one-hour cache writes have no such
 * fallback. A span with tokens in a bucket that has no price, or of a tier or
 * region that has none, is left unpriced (counted as such), never priced at
 * another rate.
 */

/** Scaled prices, possibly tiered by the whole prompt. */
export interface Tiered {
  base: bigint;
  /** Ascending; a tier applies when the whole prompt exceeds `start`. */
  tiers: { start: number; price: bigint }[];
}

/** The token buckets: usage field, cost column, catalog key, and the bucket it falls back to. */
export const TOKEN_BUCKETS = [
  { name: 'input', field: 'inputTokens', cost: 'input_cost', key: 'input_mtok', prompt: true },
  { name: 'cachedInput', field: 'cachedInputTokens', cost: 'cached_input_cost', key: 'cache_read_mtok', fallback: 'input', prompt: true },
  { name: 'cacheWriteInput', field: 'cacheWriteInputTokens', cost: 'cache_write_input_cost', key: 'cache_write_mtok', fallback: 'input', prompt: true },
  { name: 'cacheWrite1hInput', field: 'cacheWrite1hInputTokens', cost: 'cache_write_1h_input_cost', key: 'cache_write_1h_mtok', prompt: true },
  { name: 'audioInput', field: 'audioInputTokens', cost: 'audio_input_cost', key: 'input_audio_mtok', prompt: true },
  {
    name: 'cachedAudioInput',
    field: 'cachedAudioInputTokens',
    cost: 'cached_audio_input_cost',
    key: 'cache_audio_read_mtok',
    fallback: 'audioInput',
    prompt: true,
  },
  { name: 'output', field: 'outputTokens', cost: 'output_cost', key: 'output_mtok', prompt: false },
  { name: 'reasoning', field: 'reasoningTokens', cost: 'reasoning_cost', key: 'output_reasoning_mtok', fallback: 'output', prompt: false },
  { name: 'audioOutput', field: 'audioOutputTokens', cost: 'audio_output_cost', key: 'output_audio_mtok', prompt: false },
] as const satisfies readonly {
  name: string;
  field: keyof Usage;
  cost: CostColumn;
  key: string;
  fallback?: string;
  prompt: boolean;
}[];

export type TokenBucket = (typeof TOKEN_BUCKETS)[number]['name'];

/** Where a price came from: a record's source and day, for `price_source`. */
export interface PriceFrom {
  source: string;
  from: number;
}

export interface UnitPrices {
  /** Per bucket; undefined: no price (a span using it is left unpriced). */
  tokens: Record<TokenBucket, Tiered | undefined>;
  /** Per bucket, the newest dated record its price comes from (undefined: the catalog alone). */
  tokenFrom: Record<TokenBucket, PriceFrom | undefined>;
  imageEach: bigint;
  webSearchEach: bigint;
  requestEach: bigint;
  /** The newest dated record the per-unit prices come from. */
  unitFrom: PriceFrom | undefined;
  /** Whether any price comes from a dated record (else `source` names every span's prices). */
  dated: boolean;
  /** Bucket -> the bucket whose price it took. */
  fallbacks: Record<string, string>;
  /** `price_source` when no record priced a bucket the span used (`catalog:<tag>`, `override:<id>`). */
  source: string;
}

/** Why a tier or region has no prices for a model, when it has none at all. */
export interface NoPrices {
  missing: string;
}

const ZERO: Tiered = { base: 0n, tiers: [] };

function scaled(v: PriceValue | undefined): Tiered | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'number') return { base: parseDecimal(v), tiers: [] };
  return { base: parseDecimal(v.base), tiers: [...v.tiers].sort((a, b) => a.start - b.start).map((t) => ({ start: t.start, price: parseDecimal(t.price) })) };
}

const SCALE = 10n ** BigInt(SCALE_DIGITS);
const times = (p: bigint, m: bigint): bigint => (p * m) / SCALE;
function multiplied(t: Tiered | undefined, m: bigint): Tiered | undefined {
  if (t === undefined) return undefined;
  return { base: times(t.base, m), tiers: t.tiers.map((x) => ({ start: x.start, price: times(x.price, m) })) };
}

/** The price at a prompt size: the last tier the whole prompt exceeds, else the base. */
export function priceAt(t: Tiered, prompt: number): bigint {
  let p = t.base;
  for (const tier of t.tiers) if (prompt > tier.start) p = tier.price;
  return p;
}

/** A variant of the standard price: a service tier and a region ('' for the standard ones). */
export interface Variant {
  tier: string;
  region: string;
}

export const STANDARD: Variant = Object.freeze({ tier: '', region: '' });

/**
 * The unit prices of a variant from a model's merged prices. A bucket of a
 * tier takes the tier's own price for it, else the standard price times the
 * tier's multiplier; likewise a region on top of the tier. A tier or region
 * that states nothing at all for the model has no prices.
 */
export function unitPrices(merged: MergedPrices, variant: Variant, catalogTag: string): UnitPrices | NoPrices {
  const own = (key: string): PriceValue | undefined => merged.get(key)?.value;
  const newer = (a: PriceFrom | undefined, key: string): PriceFrom | undefined => {
    const s = merged.get(key)?.from;
    if (s === undefined || s.record < 0) return a;
    return a === undefined || s.from >= a.from ? { source: `catalog:${s.source}`, from: s.from } : a;
  };
  const states = (prefix: string): boolean => [...merged.keys()].some((k) => k.startsWith(prefix));
  const tierPrefix = variant.tier === '' ? undefined : `tier:${variant.tier}.`;
  const regionPrefix = variant.region === '' ? undefined : `region:${variant.region}.`;
  if (tierPrefix !== undefined && !states(tierPrefix)) return { missing: `no ${variant.tier} tier price` };
  if (regionPrefix !== undefined && !states(regionPrefix)) return { missing: `no price in region ${variant.region}` };
  const factor = (prefix: string | undefined): bigint | undefined => {
    const m = prefix === undefined ? undefined : own(`${prefix}multiplier`);
    return typeof m === 'number' ? parseDecimal(m) : undefined;
  };
  const tierFactor = factor(tierPrefix);
  const regionFactor = factor(regionPrefix);

  /** A key's own price in the variant (before fallbacks) and the newest record it comes from. */
  const priceOf = (key: string): { price: Tiered | undefined; from: PriceFrom | undefined } => {
    if (regionPrefix !== undefined && tierPrefix === undefined && own(regionPrefix + key) !== undefined) {
      return { price: scaled(own(regionPrefix + key)), from: newer(undefined, regionPrefix + key) };
    }
    let price: Tiered | undefined;
    let from: PriceFrom | undefined;
    if (tierPrefix !== undefined && own(tierPrefix + key) !== undefined) {
      price = scaled(own(tierPrefix + key));
      from = newer(undefined, tierPrefix + key);
    } else {
      price = scaled(own(key));
      from = newer(undefined, key);
      if (tierPrefix !== undefined) {
        price = tierFactor === undefined ? undefined : multiplied(price, tierFactor);
        from = newer(from, `${tierPrefix}multiplier`);
      }
    }
    if (regionPrefix === undefined) return { price, from };
    return { price: regionFactor === undefined ? undefined : multiplied(price, regionFactor), from: newer(from, `${regionPrefix}multiplier`) };
  };

  const tokens = {} as Record<TokenBucket, Tiered | undefined>;
  const tokenFrom = {} as Record<TokenBucket, PriceFrom | undefined>;
  const fallbacks: Record<string, string> = {};
  const standard = tierPrefix === undefined && regionPrefix === undefined;
  for (const b of TOKEN_BUCKETS) {
    let { price, from } = priceOf(b.key);
    // A model priced on input or output alone (an embedding model) costs nothing on the other.
    if (price === undefined && standard && (b.name === 'input' || b.name === 'output')) price = ZERO;
    if (price === undefined && 'fallback' in b && tokens[b.fallback] !== undefined) {
      price = tokens[b.fallback];
      from = tokenFrom[b.fallback];
      fallbacks[b.name] = b.fallback;
    }
    tokens[b.name] = price;
    tokenFrom[b.name] = from;
  }
  let unitFrom: PriceFrom | undefined;
  const each = (key: string, perK: boolean): bigint => {
    const v = own(key);
    if (typeof v !== 'number') return 0n;
    unitFrom = newer(unitFrom, key);
    return perK ? parseDecimal(v) / 1000n : parseDecimal(v);
  };
  const imageEach = each('output_image', false);
  const webSearchEach = own('web_searches_kcount') !== undefined ? each('web_searches_kcount', true) : each('web_search_kcount', true);
  const requestEach = each('requests_kcount', true);
  return {
    tokens,
    tokenFrom,
    imageEach,
    webSearchEach,
    requestEach,
    unitFrom,
    dated: unitFrom !== undefined || Object.values(tokenFrom).some((x) => x !== undefined),
    fallbacks,
    source: `catalog:${catalogTag}`,
  };
}

/** A bucket's cost at a prompt size; -1 when it has tokens and no price. */
function bucketCost(n: number | undefined, p: Tiered | undefined, prompt: number): bigint {
  if (n === undefined || n === 0) return 0n;
  if (p === undefined) return -1n;
  return costPerMillion(n, priceAt(p, prompt));
}

/** The newest dated record among the prices of the buckets a span used (undefined: the catalog or an override alone). */
function newestFrom(u: Usage, prices: UnitPrices, units: boolean): PriceFrom | undefined {
  let from: PriceFrom | undefined;
  for (const b of TOKEN_BUCKETS) {
    const src = (u[b.field] ?? 0) > 0 ? prices.tokenFrom[b.name] : undefined;
    if (src !== undefined && (from === undefined || src.from >= from.from)) from = src;
  }
  if (units && prices.unitFrom !== undefined && (from === undefined || prices.unitFrom.from >= from.from)) from = prices.unitFrom;
  return from;
}

/** The exact cost columns of one span at the given unit prices; unpriced when a bucket it uses has no price. */
export function costsFor(usage: Usage | undefined, prices: UnitPrices): SpanCosts {
  const u = usage ?? {};
  const prompt = promptTokens(u);
  const t = prices.tokens;
  const input = bucketCost(u.inputTokens, t.input, prompt);
  const cached = bucketCost(u.cachedInputTokens, t.cachedInput, prompt);
  const cacheWrite = bucketCost(u.cacheWriteInputTokens, t.cacheWriteInput, prompt);
  const cacheWrite1h = bucketCost(u.cacheWrite1hInputTokens, t.cacheWrite1hInput, prompt);
  const audioInput = bucketCost(u.audioInputTokens, t.audioInput, prompt);
  const cachedAudio = bucketCost(u.cachedAudioInputTokens, t.cachedAudioInput, prompt);
  const output = bucketCost(u.outputTokens, t.output, prompt);
  const reasoning = bucketCost(u.reasoningTokens, t.reasoning, prompt);
  const audioOutput = bucketCost(u.audioOutputTokens, t.audioOutput, prompt);
  if (
    input < 0n ||
    cached < 0n ||
    cacheWrite < 0n ||
    cacheWrite1h < 0n ||
    audioInput < 0n ||
    cachedAudio < 0n ||
    output < 0n ||
    reasoning < 0n ||
    audioOutput < 0n
  )
    return UNPRICED;
  const image = costEach(u.imageCount ?? 0, prices.imageEach);
  const webSearch = costEach(u.webSearchCount ?? 0, prices.webSearchEach);
  const request = costEach(u.requestCount ?? 0, prices.requestEach);
  const units = image + webSearch + request;
  const from = prices.dated ? newestFrom(u, prices, units > 0n) : undefined;
  const total = input + cached + cacheWrite + cacheWrite1h + audioInput + cachedAudio + output + reasoning + audioOutput + units;
  return {
    input_cost: formatDecimal(input),
    output_cost: formatDecimal(output),
    reasoning_cost: formatDecimal(reasoning),
    cached_input_cost: formatDecimal(cached),
    cache_write_input_cost: formatDecimal(cacheWrite),
    image_cost: formatDecimal(image),
    web_search_cost: formatDecimal(webSearch),
    request_cost: formatDecimal(request),
    cache_write_1h_input_cost: formatDecimal(cacheWrite1h),
    audio_input_cost: formatDecimal(audioInput),
    cached_audio_input_cost: formatDecimal(cachedAudio),
    audio_output_cost: formatDecimal(audioOutput),
    total_cost: formatDecimal(total),
    priced: true,
    price_source: from === undefined ? prices.source : from.source,
  };
}
