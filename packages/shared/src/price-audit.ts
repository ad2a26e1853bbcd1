import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { CATALOG_DIR, type Adoption } from './catalog.js';
import { formatDecimal, parseDecimal } from './decimal.js';
import { normalizeProvider, type PriceEngine } from './price-engine.js';

/**
 * An audit of the catalog in force against a second maintained catalog:
 * LiteLLM's price map (`model_prices_and_context_window.json`), shipped as a
 * data file with its commit and date. Its prices are per token and have no
 * history; they are turned into the catalog's units (USD per million tokens,
 * exact decimals) and counting rules (a cache read or write is its own
 * bucket; a long-context tier applies to the whole prompt above it) before
 * they are compared, bucket by bucket and tier by tier.
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

export type Bucket = 'input' | 'output' | 'cache read' | 'cache write';
const BUCKET_FIELDS: Record<Bucket, string> = {
  input: 'input_cost_per_token',
  output: 'output_cost_per_token',
  'cache read': 'cache_read_input_token_cost',
  'cache write': 'cache_creation_input_token_cost',
};
const TIER_SUFFIXES: [string, number][] = [
  ['_above_128k_tokens', 128_000],
  ['_above_200k_tokens', 200_000],
  ['_above_256k_tokens', 256_000],
];

/** One LiteLLM entry's unit prices: per bucket, the base price and the long-context tiers. */
export interface SecondPrices {
  buckets: Partial<Record<Bucket, { base: string; tiers: { start: number; price: string }[] }>>;
}

export function secondPrices(e: LiteLlmEntry): SecondPrices {
  const buckets: SecondPrices['buckets'] = {};
  for (const [bucket, field] of Object.entries(BUCKET_FIELDS) as [Bucket, string][]) {
    const base = e[field];
    if (typeof base !== 'number') continue;
    const tiers = TIER_SUFFIXES.flatMap(([suffix, start]) => {
      const v = e[`${field}${suffix}`];
      return typeof v === 'number' ? [{ start, price: perMillion(v) }] : [];
    });
    buckets[bucket] = { base: perMillion(base), tiers };
  }
  return { buckets };
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
  bucket: Bucket;
  /** `base`, or `> 200000` input tokens. */
  tier: string;
  /** USD per 1M tokens in force (the catalog, an adoption or an override); null when nothing prices it. */
  inForce: string | null;
  second: string;
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
  /** With `only`: the model names (as spans send them) this finding stands for. */
  seenAs?: string[];
}

/**
 * Every model where the second catalog disagrees with the prices in force on
 * any bucket or tier (or prices a model the catalog does not know), at
 * `at`. With `only`, just those (provider, model) pairs (models with spans),
 * matched by name or by the catalog model both names resolve to
 * (`claude-sonnet-4` and `claude-sonnet-4-20250514`).
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
    const base = engine.quote({ orgId: '', provider: target.provider, model: target.model, at: opts.at });
    if (base === null) {
      out.push({
        ...target,
        key,
        status: 'unknown to the catalog',
        source: null,
        diffs: diffsAgainst(null, theirs, () => null),
        ...(seenAs === undefined ? {} : { seenAs }),
      });
      continue;
    }
    const thresholds = [...new Set([...base.tiers, ...Object.values(theirs.buckets).flatMap((b) => b.tiers.map((t) => t.start))])].sort((a, b) => a - b);
    const quoteAt = (tier: number | undefined) =>
      tier === undefined ? base : engine.quote({ orgId: '', provider: target.provider, model: target.model, at: opts.at, usage: { inputTokens: tier + 1 } });
    const diffs = diffsAgainst(thresholds, theirs, (bucket, tier) => {
      const q = quoteAt(tier);
      if (q === null) return null;
      return { input: q.inputPerMtok, output: q.outputPerMtok, 'cache read': q.cachedInputPerMtok, 'cache write': q.cacheWriteInputPerMtok }[bucket];
    });
    if (diffs.length > 0) out.push({ ...target, key, status: 'differs', source: base.source, diffs, ...(seenAs === undefined ? {} : { seenAs }) });
  }
  return out.sort((a, b) => a.provider.localeCompare(b.provider) || a.model.localeCompare(b.model));
}

function diffsAgainst(
  thresholds: number[] | null,
  theirs: SecondPrices,
  ours: (bucket: Bucket, tier: number | undefined) => string | null | undefined,
): AuditDiff[] {
  const diffs: AuditDiff[] = [];
  for (const [bucket, b] of Object.entries(theirs.buckets) as [Bucket, NonNullable<SecondPrices['buckets'][Bucket]>][]) {
    const at = (tier: number | undefined): string => {
      let p = b.base;
      for (const t of b.tiers) if (tier !== undefined && tier >= t.start) p = t.price;
      return p;
    };
    for (const tier of [undefined, ...(thresholds ?? [])]) {
      const mine = ours(bucket, tier) ?? null;
      const second = at(tier);
      if (mine === null || formatDecimal(parseDecimal(mine)) !== second)
        diffs.push({ bucket, tier: tier === undefined ? 'base' : `> ${tier}`, inForce: mine, second });
    }
  }
  return diffs;
}

/**
 * The second catalog's price for a flagged model as an adoption: in the
 * catalog's units, from the second catalog's snapshot date, on the model the
 * catalog matches for it (with that model's match logic, so every name of it
 * gets the price), or a model of its own when the catalog has none.
 */
export function adoptionFor(engine: PriceEngine, second: SecondCatalog, finding: AuditFinding): Adoption {
  const e = second.entries[finding.key];
  if (e === undefined) throw new Error(`no entry ${finding.key} in the second catalog`);
  const theirs = secondPrices(e);
  const fields: Record<Bucket, string> = { input: 'input_mtok', output: 'output_mtok', 'cache read': 'cache_read_mtok', 'cache write': 'cache_write_mtok' };
  const prices: Adoption['prices'] = {};
  for (const [bucket, b] of Object.entries(theirs.buckets) as [Bucket, NonNullable<SecondPrices['buckets'][Bucket]>][]) {
    const base = Number(b.base);
    prices[fields[bucket]] = b.tiers.length === 0 ? base : { base, tiers: b.tiers.map((t) => ({ start: t.start, price: Number(t.price) })) };
  }
  const resolved = engine.resolve('', finding.provider, finding.model, Date.now());
  const base = { provider: finding.provider, from: second.meta.date, source: secondCatalogTag(second.meta), prices };
  // An alias (`mistral-large-latest`) names the newest version, which the catalog may match with its
  // older ones: it gets a model of its own. A snapshot name prices its whole family.
  if (resolved === null || finding.model.endsWith('-latest')) return { ...base, model: finding.model };
  if (resolved.provider === finding.provider) return { ...base, model: resolved.model };
  // A provider the catalog lacks (Vertex AI): the family's model under it, matching the same names.
  const matched = engine.providers.find((p) => p.id === resolved.provider)?.models.find((m) => m.id === resolved.model);
  return { ...base, model: resolved.model, ...(matched === undefined ? {} : { match: matched.match }) };
}
