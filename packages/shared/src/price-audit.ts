import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { CATALOG_DIR } from './catalog.js';
import { utcDay } from './dates.js';
import { formatDecimal, parseDecimal } from './decimal.js';
import { normalizeProvider, type PriceEngine, type ResolvedPrice } from './price-engine.js';
import { variantKey, type Adoption, type PriceValue } from './price-records.js';
import { priceAt, type Tiered, type TokenBucket, type Variant } from './unit-prices.js';

/**
 * An audit of the catalog in force against a second maintained catalog:
 * LiteLLM's price map (`model_prices_and_context_window.json`), shipped as a
 * data file with its commit and date. Its prices are per token and have no
 * history; they are turned into the catalog's units (USD per million tokens,
 * exact decimals) and counting rules (a cache read or write is its own
 * bucket; a long-context tier applies to the whole prompt above it) before
 * they are compared, bucket by bucket, tier by tier, and for each service
 * tier and region it prices apart (flex, priority, batch; US-only and
 * regional processing). Every disagreement lists each source that states the
 * price, with the day it holds from, newest first.
 */

export interface SecondCatalogMeta {
  source: string;
  date: string;
  commit: string;
  sha256: string;
}

export type LiteLlmEntry = Record<string, unknown> & { litellm_provider?: string; mode?: string };

export interface SecondCatalog {
  entries: Record<string, LiteLlmEntry>;
  meta: SecondCatalogMeta;
}

/** `litellm@8442b939a6ea/2026-07-24`: what adopted prices name in price_source. */
export function secondCatalogTag(m: SecondCatalogMeta): string {
  return `${m.source}@${m.commit.slice(0, 12)}/${m.date}`;
}

let bundled: SecondCatalog | undefined;

export function bundledSecondCatalog(): SecondCatalog {
  if (bundled === undefined) {
    const raw = fs.readFileSync(path.join(CATALOG_DIR, 'litellm.json'));
    const meta = JSON.parse(fs.readFileSync(path.join(CATALOG_DIR, 'litellm.meta.json'), 'utf8')) as Omit<SecondCatalogMeta, 'sha256'>;
    bundled = {
      entries: JSON.parse(raw.toString('utf8')) as Record<string, LiteLlmEntry>,
      meta: { ...meta, sha256: createHash('sha256').update(raw).digest('hex') },
    };
  }
  return bundled;
}

/** LiteLLM's provider names, as the catalog's provider ids. */
export const LITELLM_PROVIDERS: Record<string, string> = {
  openai: 'openai',
  anthropic: 'anthropic',
  deepseek: 'deepseek',
  xai: 'x-ai',
  mistral: 'mistral',
  gemini: 'google',
  'vertex_ai-language-models': 'google-vertex',
  'vertex_ai-anthropic_models': 'google-vertex',
  bedrock: 'aws',
  bedrock_converse: 'aws',
  groq: 'groq',
  cohere: 'cohere',
  cohere_chat: 'cohere',
  perplexity: 'perplexity',
  together_ai: 'together',
  fireworks_ai: 'fireworks',
  cerebras: 'cerebras',
  moonshot: 'moonshotai',
};

/** Key prefixes LiteLLM puts before a model name (`deepseek/deepseek-chat`). */
const KEY_PREFIXES = [
  'deepseek',
  'xai',
  'mistral',
  'gemini',
  'vertex_ai',
  'bedrock',
  'groq',
  'cohere',
  'perplexity',
  'together_ai',
  'fireworks_ai',
  'cerebras',
  'moonshot',
  'openai',
  'anthropic',
];
const PRICED_MODES = new Set(['chat', 'completion', 'responses', 'embedding']);

/** A per-token float as an exact decimal per million tokens (2.8e-7 -> "0.28"). */
export function perMillion(x: number): string {
  const [mantissa = '0', exp = '0'] = x.toExponential().split('e');
  const negative = mantissa.startsWith('-');
  const digits = mantissa.replace('-', '').replace('.', '');
  // The point sits after the first digit, moved by the exponent and by 10^6.
  const point = 1 + Number(exp) + 6;
  const int = point <= 0 ? '0' : digits.slice(0, point).padEnd(point, '0');
  const frac = point <= 0 ? '0'.repeat(-point) + digits : digits.slice(point);
  return formatDecimal(parseDecimal(`${negative ? '-' : ''}${int}${frac === '' ? '' : `.${frac}`}`));
}

/** A bucket as the audit names it, with the catalog key it is priced by and LiteLLM's field for it. */
const AUDIT_BUCKETS = [
  { bucket: 'input', name: 'input', key: 'input_mtok', fields: ['input_cost_per_token'] },
  { bucket: 'output', name: 'output', key: 'output_mtok', fields: ['output_cost_per_token'] },
  { bucket: 'cache read', name: 'cachedInput', key: 'cache_read_mtok', fields: ['cache_read_input_token_cost'] },
  { bucket: 'cache write', name: 'cacheWriteInput', key: 'cache_write_mtok', fields: ['cache_creation_input_token_cost'] },
  { bucket: 'cache write 1h', name: 'cacheWrite1hInput', key: 'cache_write_1h_mtok', fields: ['cache_creation_input_token_cost_above_1hr'] },
  { bucket: 'audio input', name: 'audioInput', key: 'input_audio_mtok', fields: ['input_cost_per_audio_token'] },
  // LiteLLM names OpenAI's cached audio price `cache_creation_input_audio_token_cost` where it has no read price.
  {
    bucket: 'cached audio input',
    name: 'cachedAudioInput',
    key: 'cache_audio_read_mtok',
    fields: ['cache_read_input_audio_token_cost', 'cache_creation_input_audio_token_cost'],
  },
  { bucket: 'audio output', name: 'audioOutput', key: 'output_audio_mtok', fields: ['output_cost_per_audio_token'] },
] as const satisfies readonly { bucket: string; name: TokenBucket; key: string; fields: readonly string[] }[];

export type Bucket = (typeof AUDIT_BUCKETS)[number]['bucket'];

/** LiteLLM's long-context suffixes: the prompt size above which the price holds. */
const TIER_SUFFIXES: [string, number][] = [
  ['_above_128k_tokens', 128_000],
  ['_above_200k_tokens', 200_000],
  ['_above_256k_tokens', 256_000],
  ['_above_272k_tokens', 272_000],
  ['_above_512k_tokens', 512_000],
];

/** LiteLLM's service tiers, by field suffix (`input_cost_per_token_flex`). */
const SERVICE_TIERS: [string, string][] = [
  ['_flex', 'flex'],
  ['_priority', 'priority'],
  ['_batches', 'batch'],
];

type SecondBucket = { base: string; tiers: { start: number; price: string }[] };

/** One LiteLLM entry's unit prices: per bucket the base price and long-context tiers, per service tier likewise, and region multipliers. */
export interface SecondPrices {
  buckets: Partial<Record<Bucket, SecondBucket>>;
  /** Per service tier (flex, priority, batch): its buckets. */
  serviceTiers: Record<string, Partial<Record<Bucket, SecondBucket>>>;
  /** Per region (us, eu): the multiple of the standard price it is billed at. */
  regions: Record<string, string>;
}

function bucketAt(e: LiteLlmEntry, field: string, suffix: string): SecondBucket | undefined {
  const base = e[`${field}${suffix}`];
  if (typeof base !== 'number') return undefined;
  const tiers = TIER_SUFFIXES.flatMap(([t, start]) => {
    const v = e[`${field}${t}${suffix}`];
    return typeof v === 'number' ? [{ start, price: perMillion(v) }] : [];
  });
  return { base: perMillion(base), tiers };
}

export function secondPrices(e: LiteLlmEntry): SecondPrices {
  const read = (suffix: string): Partial<Record<Bucket, SecondBucket>> => {
    const out: Partial<Record<Bucket, SecondBucket>> = {};
    for (const b of AUDIT_BUCKETS) {
      for (const field of b.fields) {
        const v = b.bucket === 'cache write 1h' ? oneHourWrite(e, suffix) : bucketAt(e, field, suffix);
        if (v !== undefined) {
          out[b.bucket] = v;
          break;
        }
      }
    }
    return out;
  };
  const serviceTiers: SecondPrices['serviceTiers'] = {};
  for (const [suffix, tier] of SERVICE_TIERS) {
    const b = read(suffix);
    if (Object.keys(b).length > 0) serviceTiers[tier] = b;
  }
  const regions: Record<string, string> = {};
  for (const region of ['us', 'eu']) {
    const m = e[`regional_processing_uplift_multiplier_${region}`];
    if (typeof m === 'number') regions[region] = formatDecimal(parseDecimal(m));
  }
  // Anthropic's US-only inference, as LiteLLM keeps it.
  const us = (e['provider_specific_entry'] as Record<string, unknown> | undefined)?.us;
  if (typeof us === 'number') regions.us = formatDecimal(parseDecimal(us));
  return { buckets: read(''), serviceTiers, regions };
}

/** LiteLLM's one-hour cache write: `..._above_1hr`, its long-context price `..._above_1hr_above_200k_tokens`. */
function oneHourWrite(e: LiteLlmEntry, suffix: string): SecondBucket | undefined {
  const base = e[`cache_creation_input_token_cost_above_1hr${suffix}`];
  if (typeof base !== 'number') return undefined;
  const tiers = TIER_SUFFIXES.flatMap(([t, start]) => {
    const v = e[`cache_creation_input_token_cost_above_1hr${t}${suffix}`];
    return typeof v === 'number' ? [{ start, price: perMillion(v) }] : [];
  });
  return { base: perMillion(base), tiers };
}

/** The catalog's (provider, model) an entry of the second catalog prices, or undefined when its provider is not one the catalog has. */
export function entryTarget(key: string, e: LiteLlmEntry): { provider: string; model: string } | undefined {
  const provider = LITELLM_PROVIDERS[e.litellm_provider ?? ''];
  if (provider === undefined || !PRICED_MODES.has(e.mode ?? 'chat')) return undefined;
  const parts = key.split('/');
  // Region- or deployment-scoped keys (`bedrock/us-east-1/...`) price what a span's model name does not say.
  if (parts.length > 2) return undefined;
  const model = parts.length === 2 && KEY_PREFIXES.includes(parts[0] ?? '') ? (parts[1] ?? '') : parts.length === 1 ? key : undefined;
  return model === undefined || model === '' ? undefined : { provider, model };
}

export interface AuditDiff {
  bucket: Bucket | 'multiplier';
  /** `base`, or `> 200000` input tokens. */
  tier: string;
  /** The service tier or region the price is of (`flex`, `batch`, `region us`); absent for the standard price. */
  variant?: string;
  /** USD per 1M tokens in force (the catalog, an adoption or an override), or the multiple; null when nothing prices it. */
  inForce: string | null;
  second: string;
}

/** One source of a price, with the day it holds from. */
export interface AuditSource {
  /** The catalog's tag, an adoption's source, `override:<id>`, or the second catalog's tag. */
  source: string;
  /** YYYY-MM-DD from which it holds ('' for a catalog price without a start date). */
  from: string;
  /** YYYY-MM-DD of the data it comes from: the catalog's date, the second catalog's snapshot, an adoption's source. */
  asOf: string;
  /** The price it states (USD per 1M tokens, or the multiple), null when it states none for this bucket. */
  price: string | null;
  /** What it is: the catalog in force, a dated adoption, an override, or the second catalog. */
  kind: 'catalog' | 'adoption' | 'override' | 'second catalog';
  /** Whether the price in force is this one. */
  inForce: boolean;
}

export interface AuditFinding {
  provider: string;
  model: string;
  /** The second catalog's key. */
  key: string;
  status: 'differs' | 'unknown to the catalog';
  /** Where the price in force comes from (`catalog:...`, `override:...`), or null. */
  source: string | null;
  diffs: AuditDiff[];
  /** For each diff (same index), every source that states its price, the newest data first. */
  diffSources: AuditSource[][];
  /** With `only`: the model names (as spans send them) this finding stands for. */
  seenAs?: string[];
}

const AUDIT_VARIANTS = (theirs: SecondPrices): { variant: Variant; label: string | undefined; buckets: Partial<Record<Bucket, SecondBucket>> }[] => [
  { variant: { tier: '', region: '' }, label: undefined, buckets: theirs.buckets },
  ...Object.entries(theirs.serviceTiers).map(([tier, buckets]) => ({ variant: { tier, region: '' }, label: tier, buckets })),
];

/** Thresholds one token apart are one threshold (a catalog says `> 271999`, LiteLLM `above 272k`): the larger stands for both. */
function thresholdsOf(all: number[]): number[] {
  const sorted = [...new Set(all)].sort((a, b) => a - b);
  return sorted.filter((t, i) => sorted[i + 1] === undefined || (sorted[i + 1] as number) - t > 1);
}

function theirsAt(b: SecondBucket, prompt: number | undefined): string {
  let p = b.base;
  for (const t of b.tiers) if (prompt !== undefined && prompt >= t.start) p = t.price;
  return p;
}

/**
 * Every model where the second catalog disagrees with the prices in force on
 * any bucket, tier, service tier or region (or prices a model the catalog
 * does not know), at `at`. With `only`, just those (provider, model) pairs
 * (models with spans), matched by name or by the catalog model both names
 * resolve to (`claude-sonnet-4` and `claude-sonnet-4-20250514`).
 */
export function auditPrices(
  engine: PriceEngine,
  second: SecondCatalog,
  opts: { at: number; only?: readonly { provider: string; model: string }[] | undefined },
): AuditFinding[] {
  const resolvedId = (provider: string, model: string): string | undefined => {
    const r = engine.resolve('', provider, model, opts.at);
    return r === null ? undefined : `${r.provider}\u0000${r.model}`;
  };
  const wanted = opts.only?.map((p) => {
    const model = p.model.includes('/') ? p.model.slice(p.model.indexOf('/') + 1) : p.model;
    return { provider: normalizeProvider(p.provider), model, sent: p.model, id: resolvedId(p.provider, p.model) };
  });
  const out: AuditFinding[] = [];
  const seen = new Set<string>();
  for (const [key, e] of Object.entries(second.entries)) {
    if (typeof e !== 'object' || e === null) continue;
    const target = entryTarget(key, e);
    if (target === undefined) continue;
    let seenAs: string[] | undefined;
    if (wanted !== undefined) {
      const sameProvider = wanted.filter((w) => w.provider === '' || w.provider === target.provider);
      const byName = sameProvider.filter((w) => w.model === target.model);
      const tid = byName.length === sameProvider.length ? undefined : resolvedId(target.provider, target.model);
      const matched = sameProvider.filter((w) => w.model === target.model || (tid !== undefined && w.id === tid));
      if (matched.length === 0) continue;
      seenAs = [...new Set(matched.map((w) => w.sent))];
    }
    const id = `${target.provider}\u0000${target.model}`;
    if (seen.has(id)) continue;
    seen.add(id);
    const theirs = secondPrices(e);
    if (Object.keys(theirs.buckets).length === 0) continue;
    const resolved = engine.resolve('', target.provider, target.model, opts.at);
    const found = diffsOf(engine, resolved, theirs, target, opts.at, second);
    if (resolved === null) {
      out.push({ ...target, key, status: 'unknown to the catalog', source: null, ...found, ...(seenAs === undefined ? {} : { seenAs }) });
      continue;
    }
    const base = engine.quote({ orgId: '', provider: target.provider, model: target.model, at: opts.at });
    if (found.diffs.length > 0)
      out.push({ ...target, key, status: 'differs', source: base?.source ?? resolved.source, ...found, ...(seenAs === undefined ? {} : { seenAs }) });
  }
  return out.sort((a, b) => a.provider.localeCompare(b.provider) || a.model.localeCompare(b.model));
}

function diffsOf(
  engine: PriceEngine,
  resolved: ResolvedPrice | null,
  theirs: SecondPrices,
  target: { provider: string; model: string },
  at: number,
  second: SecondCatalog,
): Pick<AuditFinding, 'diffs' | 'diffSources'> {
  const diffs: AuditDiff[] = [];
  const diffSources: AuditSource[][] = [];
  const text = (t: Tiered | undefined, prompt: number | undefined): string | null => (t === undefined ? null : formatDecimal(priceAt(t, prompt ?? 0)));
  // A model the catalog does not know is listed with the second catalog's standard prices alone.
  for (const { variant, label, buckets } of resolved === null ? AUDIT_VARIANTS(theirs).slice(0, 1) : AUDIT_VARIANTS(theirs)) {
    const ours = resolved?.variant(variant);
    const prices = ours === undefined || 'missing' in ours ? undefined : ours;
    const thresholds =
      resolved === null
        ? []
        : thresholdsOf([
            ...Object.values(prices?.tokens ?? {}).flatMap((t) => t?.tiers.map((x) => x.start) ?? []),
            ...Object.values(buckets).flatMap((b) => b.tiers.map((t) => t.start)),
          ]);
    for (const b of AUDIT_BUCKETS) {
      const their = buckets[b.bucket];
      if (their === undefined) continue;
      for (const tier of [undefined, ...thresholds]) {
        const prompt = tier === undefined ? undefined : tier + 1;
        const mine = prices === undefined ? null : text(prices.tokens[b.name], prompt);
        const theirPrice = theirsAt(their, prompt);
        if (mine !== null && formatDecimal(parseDecimal(mine)) === theirPrice) continue;
        diffs.push({
          bucket: b.bucket,
          tier: tier === undefined ? 'base' : `> ${tier}`,
          ...(label === undefined ? {} : { variant: label }),
          inForce: mine,
          second: theirPrice,
        });
        diffSources.push(sourcesOf(engine, resolved, target, at, variantKeys(variant, b.key), prompt, second, theirPrice));
      }
    }
  }
  for (const [region, multiple] of resolved === null ? [] : Object.entries(theirs.regions)) {
    const key = `region:${region}.multiplier`;
    const mine = resolved?.merged?.get(key)?.value;
    const minePrice = typeof mine === 'number' ? formatDecimal(parseDecimal(mine)) : null;
    if (minePrice === multiple) continue;
    diffs.push({ bucket: 'multiplier', tier: 'base', variant: `region ${region}`, inForce: minePrice, second: multiple });
    diffSources.push(sourcesOf(engine, resolved, target, at, [key], undefined, second, multiple));
  }
  return { diffs, diffSources };
}

/** The keys a bucket's price in a variant is made of: its own price there, the variant's multiple, the standard price. */
function variantKeys(v: Variant, key: string): string[] {
  return v.tier === '' ? [key] : [`tier:${v.tier}.${key}`, `tier:${v.tier}.multiplier`, key];
}

function valueText(v: PriceValue | undefined, prompt: number | undefined): string | null {
  if (v === undefined) return null;
  if (typeof v === 'number') return formatDecimal(parseDecimal(v));
  let p = v.base;
  for (const t of [...v.tiers].sort((a, b) => a.start - b.start)) if ((prompt ?? 0) > t.start) p = t.price;
  return formatDecimal(parseDecimal(p));
}

/** Every source stating one of `keys` for the model (first key first), and the second catalog's price, newest first. */
function sourcesOf(
  engine: PriceEngine,
  resolved: ResolvedPrice | null,
  target: { provider: string; model: string },
  at: number,
  keys: string[],
  prompt: number | undefined,
  second: SecondCatalog,
  theirPrice: string,
): AuditSource[] {
  const out: AuditSource[] = [];
  const winner = (k: string) => resolved?.merged?.get(k)?.from;
  const inForceKey = keys.find((k) => winner(k) !== undefined);
  const basis = engine.basis(normalizeProvider(target.provider), target.model, at);
  if (resolved !== null && resolved.merged === undefined) {
    out.push({ source: resolved.source, from: '', asOf: '', price: null, kind: 'override', inForce: true });
  }
  if (basis?.catalog != null) {
    const k = keys.find((x) => basis.catalog?.entry.prices[x] !== undefined);
    const from = basis.catalog.entry.from;
    out.push({
      source: engine.catalogVersion,
      from: Number.isFinite(from) ? utcDay(from) : '',
      asOf: engine.catalogMeta.date,
      price: k === undefined ? null : valueText(basis.catalog.entry.prices[k] as PriceValue, prompt),
      kind: 'catalog',
      inForce: k !== undefined && k === inForceKey && winner(k)?.record === -1,
    });
  }
  for (const i of basis?.records ?? []) {
    const a = engine.adoptionAt(i);
    const k = a === undefined ? undefined : keys.find((x) => a.prices[x] !== undefined);
    if (a === undefined || k === undefined) continue;
    const price = variantKey(k)?.key === 'multiplier' && k !== keys[0] ? `x${valueText(a.prices[k], prompt) ?? ''}` : valueText(a.prices[k], prompt);
    // A source named with its date (litellm@.../2026-07-24) is data of that day; a provider's page, of the day it took effect.
    const asOf = /(\d{4}-\d{2}-\d{2})$/.exec(a.source)?.[1] ?? a.from;
    out.push({ source: a.source, from: a.from, asOf, price, kind: 'adoption', inForce: k === inForceKey && winner(k)?.record === i });
  }
  out.push({
    source: secondCatalogTag(second.meta),
    from: second.meta.date,
    asOf: second.meta.date,
    price: theirPrice,
    kind: 'second catalog',
    inForce: false,
  });
  return out.sort((a, b) => b.asOf.localeCompare(a.asOf) || b.from.localeCompare(a.from));
}

/**
 * The second catalog's prices for a flagged model as an adoption: in the
 * catalog's units, every bucket, service tier and region it states, holding
 * from `from` (default: the second catalog's snapshot date, the first day it
 * is known to hold), on the model the catalog matches for it (so every name of
 * it gets the price), or a model of its own when the catalog has none.
 */
export function adoptionFor(engine: PriceEngine, second: SecondCatalog, finding: AuditFinding, from?: string): Adoption {
  const e = second.entries[finding.key];
  if (e === undefined) throw new Error(`no entry ${finding.key} in the second catalog`);
  const theirs = secondPrices(e);
  const prices: Adoption['prices'] = {};
  const value = (b: SecondBucket): PriceValue =>
    b.tiers.length === 0 ? Number(b.base) : { base: Number(b.base), tiers: b.tiers.map((t) => ({ start: t.start, price: Number(t.price) })) };
  const keyOf = (bucket: Bucket) => (AUDIT_BUCKETS.find((x) => x.bucket === bucket) as (typeof AUDIT_BUCKETS)[number]).key;
  for (const [bucket, b] of Object.entries(theirs.buckets) as [Bucket, SecondBucket][]) prices[keyOf(bucket)] = value(b);
  for (const [tier, buckets] of Object.entries(theirs.serviceTiers)) {
    for (const [bucket, b] of Object.entries(buckets) as [Bucket, SecondBucket][]) prices[`tier:${tier}.${keyOf(bucket)}`] = value(b);
  }
  for (const [region, m] of Object.entries(theirs.regions)) prices[`region:${region}.multiplier`] = Number(m);
  const resolved = engine.resolve('', finding.provider, finding.model, Date.now());
  const base = { provider: finding.provider, from: from ?? second.meta.date, source: secondCatalogTag(second.meta), prices };
  // An alias (`mistral-large-latest`) names the newest version, which the catalog may match with its
  // older ones: it gets a model of its own. A snapshot name prices its whole family.
  if (resolved === null || finding.model.endsWith('-latest')) return { ...base, model: finding.model };
  if (resolved.provider === finding.provider) return { ...base, model: resolved.model };
  // A provider the catalog lacks (Vertex AI): the family's model under it, matching the same names.
  const matched = engine.providers.find((p) => p.id === resolved.provider)?.models.find((m) => m.id === resolved.model);
  return { ...base, model: resolved.model, ...(matched === undefined ? {} : { match: matched.match }) };
}
