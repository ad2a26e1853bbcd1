import type { MatchLogic, ModelInfo, ModelPrice } from '@pydantic/genai-prices';

/**
 * Prices that keep their dates. The catalog gives each model its prices in
 * force at an instant (a price of the catalog holds from its start date, or
 * from the beginning); adoptions (`catalog/adoptions.json` and the ones made
 * with `prices audit --adopt`) add dated prices on top, each naming only the
 * keys it states. At an instant, each key takes its value from the newest
 * source stating it whose date has come: an adoption never drops a bucket,
 * a tier or a variant it does not state, and never reaches back before its
 * date, so a span keeps the price of its day however often it is repriced.
 *
 * Keys are genai-prices' price keys (`input_mtok`, `cache_write_1h_mtok`,
 * `input_audio_mtok`, ...) and the prices of a service tier or a region,
 * `tier:<tier>.<key>` or `region:<region>.<key>`, where the key may be
 * `multiplier`: the tier's or region's price as a multiple of the standard
 * one (Batch APIs at 0.5, Anthropic's US-only inference at 1.1).
 */

export type PriceValue = number | { base: number; tiers: { start: number; price: number }[] };

/** A dated price of one model (or, with model `*`, a rule of every model of a provider). */
export interface Adoption {
  provider: string;
  /** The catalog's model id, a model of its own (an alias such as `mistral-large-latest`), or `*`. */
  model: string;
  /** YYYY-MM-DD: the day from which these prices hold. */
  from: string;
  /** Where the prices come from: `litellm@8442b939a6ea/2026-07-24`, or a provider's pricing page. */
  source: string;
  /** For a model the provider does not have: the names it matches (genai-prices match logic; default: the model's name). */
  match?: MatchLogic | undefined;
  /** The keys it states; nothing else. */
  prices: Record<string, PriceValue>;
  /** Why the release adopts it (the page it was checked against); data, not used for pricing. */
  why?: string | undefined;
}

/** Every model of a provider: such a record may state tier and region keys only. */
export const EVERY_MODEL = '*';

/** The price keys of the token buckets and per-unit prices, as genai-prices names them. */
export const BUCKET_KEYS = [
  'input_mtok',
  'cache_read_mtok',
  'cache_write_mtok',
  'cache_write_1h_mtok',
  'output_mtok',
  'output_reasoning_mtok',
  'input_audio_mtok',
  'cache_audio_read_mtok',
  'output_audio_mtok',
  'output_image',
  'web_searches_kcount',
  'web_search_kcount',
  'requests_kcount',
] as const;

const VARIANT_KEY = /^(tier|region):([a-z0-9_-]+)\.([a-z0-9_]+)$/;

/** A variant key's parts (`tier:flex.input_mtok` -> tier, flex, input_mtok), or undefined for a plain key. */
export function variantKey(key: string): { kind: 'tier' | 'region'; name: string; key: string } | undefined {
  const m = VARIANT_KEY.exec(key);
  if (m === null) return undefined;
  return { kind: m[1] as 'tier' | 'region', name: m[2] as string, key: m[3] as string };
}

/** Why a record's price keys are not usable, or undefined when they are. */
export function invalidPriceKeys(a: Pick<Adoption, 'model' | 'prices'>): string | undefined {
  for (const [k, v] of Object.entries(a.prices)) {
    const variant = variantKey(k);
    const plain = variant?.key ?? k;
    if (plain !== 'multiplier' && !(BUCKET_KEYS as readonly string[]).includes(plain)) return `unknown price key ${JSON.stringify(k)}`;
    if (plain === 'multiplier' && (variant === undefined || typeof v !== 'number')) return `${JSON.stringify(k)} must be a tier's or region's number`;
    if (a.model === EVERY_MODEL && variant === undefined)
      return `a rule of every model (model "*") states tier and region prices only, not ${JSON.stringify(k)}`;
    if (typeof v === 'number' ? !(v >= 0 && Number.isFinite(v)) : !validTiers(v))
      return `the price of ${JSON.stringify(k)} must be a number >= 0 or { base, tiers }`;
  }
  return undefined;
}

function validTiers(v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return false;
  const t = v as { base?: unknown; tiers?: unknown };
  return (
    typeof t.base === 'number' &&
    t.base >= 0 &&
    Array.isArray(t.tiers) &&
    t.tiers.every(
      (x: unknown) => typeof x === 'object' && x !== null && Number.isSafeInteger((x as { start: number }).start) && (x as { price: number }).price >= 0,
    )
  );
}

/** genai-prices' match logic, as its engine applies it (case-insensitive but for regexes). */
export function matches(logic: MatchLogic, name: string): boolean {
  const n = name.toLowerCase();
  if ('or' in logic) return logic.or.some((l) => matches(l, name));
  if ('and' in logic) return logic.and.every((l) => matches(l, name));
  if ('equals' in logic) return n === logic.equals.toLowerCase();
  if ('starts_with' in logic) return n.startsWith(logic.starts_with.toLowerCase());
  if ('ends_with' in logic) return n.endsWith(logic.ends_with.toLowerCase());
  if ('contains' in logic) return n.includes(logic.contains.toLowerCase());
  if ('regex' in logic) return new RegExp(logic.regex).test(name);
  return false;
}

/** A record's day as epoch ms (its start, UTC). */
export function dayMs(day: string): number {
  return Date.parse(`${day}T00:00:00Z`);
}

/** Where one key's value comes from. */
export interface KeySource {
  /** The catalog's tag, or the record's source. */
  source: string;
  /** Epoch ms from which it holds; -Infinity for a catalog price without a start date. */
  from: number;
  /** The record's index in the list the engine holds, or -1 for the catalog. */
  record: number;
}

/** A model's prices at an instant: every key with its value and where it comes from. */
export type MergedPrices = Map<string, { value: PriceValue; from: KeySource }>;

/** The catalog's price of a model in force at an instant, with the day it holds from. */
export interface CatalogEntry {
  prices: ModelPrice;
  /** Its place among the model's prices. */
  index: number;
  /** Epoch ms of its start date; -Infinity when it has none (the model's first price, a time-of-day price). */
  from: number;
}

/** The entry of `model.prices` that is `inForce` (as genai-prices picked it), with its start date. */
export function catalogEntry(model: ModelInfo, inForce: ModelPrice): CatalogEntry {
  if (!Array.isArray(model.prices)) return { prices: inForce, index: 0, from: -Infinity };
  const index = model.prices.findIndex((e) => e.prices === inForce);
  const c = model.prices[index]?.constraint as { start_date?: string } | undefined;
  const from = c?.start_date === undefined ? -Infinity : Date.parse(c.start_date.length === 10 ? `${c.start_date}T00:00:00Z` : c.start_date);
  return { prices: inForce, index, from };
}

/**
 * The prices of a model at an instant: the catalog's entry in force, then
 * each record that has come into force (ascending by date; on the same day,
 * the one later in `records` wins: the caller lists a model of its own after
 * the catalog model it stands apart from, a stored adoption after the
 * release's), each key taken from the newest. Records of every model (`*`)
 * fill only keys nothing more specific states.
 */
export function mergePrices(
  catalog: { entry: CatalogEntry; tag: string } | undefined,
  records: readonly { index: number; adoption: Adoption }[],
): MergedPrices {
  const out: MergedPrices = new Map();
  if (catalog !== undefined) {
    for (const [k, v] of Object.entries(catalog.entry.prices)) {
      if (v !== undefined) out.set(k, { value: v as PriceValue, from: { source: catalog.tag, from: catalog.entry.from, record: -1 } });
    }
  }
  const specific = records.filter((r) => r.adoption.model !== EVERY_MODEL);
  const sorted = [...specific].sort((a, b) => dayMs(a.adoption.from) - dayMs(b.adoption.from));
  for (const { index, adoption } of sorted) {
    const from = dayMs(adoption.from);
    for (const [k, v] of Object.entries(adoption.prices)) {
      const seen = out.get(k);
      if (seen === undefined || seen.from.from <= from) out.set(k, { value: v, from: { source: adoption.source, from, record: index } });
    }
  }
  for (const { index, adoption } of records) {
    if (adoption.model !== EVERY_MODEL) continue;
    for (const [k, v] of Object.entries(adoption.prices)) {
      if (!out.has(k)) out.set(k, { value: v, from: { source: adoption.source, from: dayMs(adoption.from), record: index } });
    }
  }
  return out;
}
