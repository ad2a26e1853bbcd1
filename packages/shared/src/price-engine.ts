import { calcPrice, findProvider, updatePrices, waitForUpdate, type ModelInfo } from '@pydantic/genai-prices';
import { looksLikeBedrock, pricingRegion, regionOf, serviceTierOf } from './billing-mode.js';
import { bundledCatalog, catalogTag, readCatalogFile, type Catalog } from './catalog.js';
import { formatDecimal, parseDecimal } from './decimal.js';
import { catalogEntry, dayMs, EVERY_MODEL, matches, mergePrices, type Adoption, type CatalogEntry, type MergedPrices } from './price-records.js';
import { normalizeProvider, PROVIDER_FALLBACKS } from './providers.js';
import { promptTokens, UNPRICED, type SpanCosts } from './rows.js';
import type { Span, Usage } from './schema.js';
import { costsFor, priceAt, STANDARD, TOKEN_BUCKETS, unitPrices, type NoPrices, type Tiered, type UnitPrices, type Variant } from './unit-prices.js';

export { normalizeProvider } from './providers.js';
export type { Adoption } from './price-records.js';

/**
 * Prices spans per usage dimension, exactly.
 *
 * The usage counts are disjoint buckets, each multiplied by its own unit
 * price (unit-prices.ts): input, cache reads, five-minute and one-hour cache
 * writes, audio input and cached audio, output, reasoning, audio output,
 * images, web searches, requests; totalTokens is not priced. A span's service
 * tier (flex, priority, batch) and region (Anthropic's US-only inference, a
 * Vertex AI regional endpoint, OpenAI's data residency) select a variant of
 * the model's prices; a variant, or a bucket, with no price leaves the span
 * unpriced rather than priced at another rate.
 *
 * Unit prices come from, in order: an override for the span's org, a global
 * override, the catalog (@pydantic/genai-prices' engine over a catalog data
 * file: the one the product ships, one imported with `prices import`, or
 * PRICE_CATALOG_FILE; offline) with the dated prices adopted on top of it
 * (price-records.ts). The catalog is consulted once per (org, provider,
 * model, 30-minute bucket) and the result, including "no price", is cached;
 * overrides replace the cache.
 */

export interface PriceOverride {
  id: string;
  /** '' = every org. */
  orgId: string;
  /** '' = any provider. */
  provider: string;
  model: string;
  /** Epoch ms from which the override is in force; 0 = always. */
  validFrom: number;
  inputPerMtok: string;
  outputPerMtok: string;
  cachedInputPerMtok: string | null;
  cacheWriteInputPerMtok: string | null;
  reasoningPerMtok: string | null;
  imageEach: string | null;
  webSearchEach: string | null;
  requestEach: string | null;
}

export interface ResolvedPrice {
  /** `catalog:<tag>` or `override:<id>`: the source when no dated record priced the span. */
  source: string;
  provider: string;
  model: string;
  /** The model's prices as they stand (with where each came from); undefined for an override. */
  merged: MergedPrices | undefined;
  /** The standard prices. */
  prices: UnitPrices;
  /** The unit prices of a variant (a tier, a region), made once. */
  variant(v: Variant): UnitPrices | NoPrices;
}

/** Unit prices as text, for people (`prices show`). */
export interface PriceQuote {
  source: string;
  provider: string;
  model: string;
  /** e.g. 'base' or '> 200000 input tokens' when usage was given and picked a tier. */
  tier: string;
  /** The service tier and region quoted ('' for the standard ones). */
  serviceTier: string;
  region: string;
  inputPerMtok: string;
  cachedInputPerMtok: string;
  cacheWriteInputPerMtok: string;
  outputPerMtok: string;
  reasoningPerMtok: string;
  /** null: the model has no price for it (a span using it is left unpriced). */
  cacheWrite1hInputPerMtok: string | null;
  audioInputPerMtok: string | null;
  cachedAudioInputPerMtok: string | null;
  audioOutputPerMtok: string | null;
  imageEach: string;
  webSearchEach: string;
  requestEach: string;
  fallbacks: Record<string, string>;
  /** Thresholds of long-context tiers, if any. */
  tiers: number[];
}

const BUCKET_MS = 30 * 60 * 1000;

function flat(v: string | null | undefined): Tiered | undefined {
  return v === null || v === undefined ? undefined : { base: parseDecimal(v), tiers: [] };
}

function fromOverride(o: PriceOverride): UnitPrices {
  const fallbacks: Record<string, string> = {};
  const input = flat(o.inputPerMtok);
  const output = flat(o.outputPerMtok);
  const pick = (own: Tiered | undefined, dim: string, fb: Tiered | undefined, fbName: string): Tiered | undefined => {
    if (own !== undefined) return own;
    fallbacks[dim] = fbName;
    return fb;
  };
  const tokens: UnitPrices['tokens'] = {
    input,
    cachedInput: pick(flat(o.cachedInputPerMtok), 'cachedInput', input, 'input'),
    cacheWriteInput: pick(flat(o.cacheWriteInputPerMtok), 'cacheWriteInput', input, 'input'),
    cacheWrite1hInput: undefined,
    audioInput: undefined,
    cachedAudioInput: undefined,
    output,
    reasoning: pick(flat(o.reasoningPerMtok), 'reasoning', output, 'output'),
    audioOutput: undefined,
  };
  return {
    tokens,
    tokenFrom: Object.fromEntries(TOKEN_BUCKETS.map((b) => [b.name, undefined])) as UnitPrices['tokenFrom'],
    imageEach: o.imageEach === null ? 0n : parseDecimal(o.imageEach),
    webSearchEach: o.webSearchEach === null ? 0n : parseDecimal(o.webSearchEach),
    requestEach: o.requestEach === null ? 0n : parseDecimal(o.requestEach),
    unitFrom: undefined,
    dated: false,
    fallbacks,
    source: `override:${o.id}`,
  };
}

const isNoPrices = (p: UnitPrices | NoPrices): p is NoPrices => 'missing' in p;

/** A resolution whose variants are made on first use and kept. */
function resolvedPrice(base: Omit<ResolvedPrice, 'prices' | 'variant'>, make: (v: Variant) => UnitPrices | NoPrices): ResolvedPrice {
  const standard = make(STANDARD);
  const prices = isNoPrices(standard) ? unitPricesOfNothing(base.source) : standard;
  const variants = new Map<string, UnitPrices | NoPrices>();
  return {
    ...base,
    prices,
    variant(v) {
      if (v.tier === '' && v.region === '') return prices;
      const key = `${v.tier}\u0000${v.region}`;
      let p = variants.get(key);
      if (p === undefined) variants.set(key, (p = make(v)));
      return p;
    },
  };
}

function unitPricesOfNothing(source: string): UnitPrices {
  const none = Object.fromEntries(TOKEN_BUCKETS.map((b) => [b.name, undefined]));
  return {
    tokens: none as UnitPrices['tokens'],
    tokenFrom: none as UnitPrices['tokenFrom'],
    imageEach: 0n,
    webSearchEach: 0n,
    requestEach: 0n,
    unitFrom: undefined,
    dated: false,
    fallbacks: {},
    source,
  };
}

/**
 * The variant a span is priced in: its service tier (a batch call is the batch tier) and the region,
 * where its cloud bills by region (`resolvedProvider`: the provider whose prices it got).
 */
export function variantOf(span: Pick<Span, 'serviceTier' | 'batch' | 'region' | 'modelId' | 'provider'>, resolvedProvider: string): Variant {
  const tier = serviceTierOf(span);
  return { tier: tier === 'standard' ? '' : tier, region: pricingRegion(normalizeProvider(span.provider), resolvedProvider, regionOf(span)) };
}

/** What prices a model name at an instant (see PriceEngine.basis). */
export interface PriceBasis {
  /** The catalog's model the name matches and its price in force (null: only a model of its own prices it). */
  catalog: { provider: string; model: string; entry: CatalogEntry } | null;
  /** Indexes of the dated records in force for it (PriceEngine.adoptionAt). */
  records: number[];
  /** The provider and model it resolves to (a model of its own wins over the catalog's). */
  provider: string;
  model: string;
}

export interface PriceEngineOptions {
  /** The catalog to price with (default: the one the product ships). */
  catalog?: Catalog | undefined;
  /** A catalog data file in the library's format (an array of providers), read once; no network. */
  catalogFile?: string | undefined;
  /** Dated prices on top of the catalog (the release's and the adopted ones). */
  adoptions?: readonly Adoption[] | undefined;
  overrides?: PriceOverride[];
  /** Bound on cached resolutions; the cache is cleared when it is reached. */
  cacheSize?: number;
}

export class PriceEngine {
  private overrides: PriceOverride[] = [];
  /** The overrides' start times that fall inside a 30-minute bucket, ascending. */
  private starts: number[] = [];
  private readonly cache = new Map<string, ResolvedPrice | null>();
  private readonly cacheSize: number;
  private catalog: Catalog;
  private adoptions: readonly Adoption[] = [];
  /** Adoptions of catalog models by (provider, model); of models of their own by provider; of every model by provider. */
  private byModel = new Map<string, number[]>();
  private ownModels = new Map<string, number[]>();
  private everyModel = new Map<string, number[]>();
  /** One resolution per (catalog price in force, records in force): every 30-minute bucket shares it. */
  private interned = new Map<string, ResolvedPrice>();

  private constructor(opts: PriceEngineOptions, catalog: Catalog) {
    this.catalog = catalog;
    this.cacheSize = opts.cacheSize ?? 50_000;
    this.setOverrides(opts.overrides ?? []);
  }

  /** The catalog in force, as `price_source` names it (`source/date#sha256`). */
  get catalogVersion(): string {
    return catalogTag(this.catalog.meta);
  }

  get catalogMeta(): Catalog['meta'] {
    return this.catalog.meta;
  }

  /** The catalog's providers (the dated records are kept apart: see adoptionList). */
  get providers(): Catalog['providers'] {
    return this.catalog.providers;
  }

  /**
   * Builds an engine over a catalog: the one given, PRICE_CATALOG_FILE, or
   * the one the product ships. A file that is not a valid catalog is refused
   * (UsageError, one line).
   */
  static async create(opts: PriceEngineOptions = {}): Promise<PriceEngine> {
    const catalog = opts.catalog ?? (opts.catalogFile !== undefined ? readCatalogFile(opts.catalogFile) : bundledCatalog());
    const engine = new PriceEngine(opts, catalog);
    await engine.use(catalog, opts.adoptions ?? []);
    return engine;
  }

  /** Prices from now on with this catalog and these dated records (genai-prices holds one data set per process). */
  async use(catalog: Catalog, adoptions: readonly Adoption[]): Promise<void> {
    updatePrices(({ setProviderData }) => setProviderData(catalog.providers));
    await waitForUpdate();
    this.catalog = catalog;
    this.adoptions = adoptions;
    const known = new Set(catalog.providers.flatMap((p) => p.models.map((m) => `${p.id}\u0000${m.id}`)));
    const push = (map: Map<string, number[]>, key: string, i: number) => map.set(key, [...(map.get(key) ?? []), i]);
    this.byModel = new Map();
    this.ownModels = new Map();
    this.everyModel = new Map();
    adoptions.forEach((a, i) => {
      if (a.model === EVERY_MODEL) push(this.everyModel, a.provider, i);
      else if (a.match === undefined && known.has(`${a.provider}\u0000${a.model}`)) push(this.byModel, `${a.provider}\u0000${a.model}`, i);
      else push(this.ownModels, a.provider, i);
    });
    this.interned = new Map();
    this.cache.clear();
  }

  get adoptionList(): readonly Adoption[] {
    return this.adoptions;
  }

  setOverrides(list: PriceOverride[]): void {
    this.overrides = [...list].sort((a, b) => b.validFrom - a.validFrom);
    this.starts = [...new Set(list.map((o) => o.validFrom).filter((t) => t % BUCKET_MS !== 0))].sort((a, b) => a - b);
    this.cache.clear();
  }

  /**
   * Which part of its 30-minute bucket `atMs` lies in, between the starts of
   * overrides within that bucket (0 when none starts inside it): spans on
   * either side of an override's start resolve, and are cached, apart.
   */
  private phase(atMs: number, bucket: number): number {
    const [lo, hi] = [bucket * BUCKET_MS, (bucket + 1) * BUCKET_MS];
    let phase = 0;
    for (const t of this.starts) {
      if (t >= hi || t > atMs) break;
      if (t > lo) phase++;
    }
    return phase;
  }

  /** The prices that apply to a span of this org, provider and model at `atMs`, or null. */
  resolve(orgId: string, provider: string | undefined, model: string, atMs: number): ResolvedPrice | null {
    let p = normalizeProvider(provider);
    if (p === '' && looksLikeBedrock(model)) p = 'aws';
    const bucket = Math.floor(atMs / BUCKET_MS);
    const key = orgId + '\u0000' + p + '\u0000' + model + '\u0000' + bucket + (this.starts.length === 0 ? '' : '\u0000' + this.phase(atMs, bucket));
    const hit = this.cache.get(key);
    if (hit !== undefined) return hit;
    const resolved = this.override(orgId, p, model, atMs) ?? this.override('', p, model, atMs) ?? this.fromCatalog(p, model, bucket * BUCKET_MS);
    if (this.cache.size >= this.cacheSize) this.cache.clear();
    this.cache.set(key, resolved);
    return resolved;
  }

  private override(orgId: string, provider: string, model: string, atMs: number): ResolvedPrice | null {
    const stripped = model.includes('/') ? model.slice(model.indexOf('/') + 1) : model;
    for (const o of this.overrides) {
      if (o.orgId !== orgId || o.validFrom > atMs) continue;
      if (o.model !== model && o.model !== stripped) continue;
      if (o.provider !== '' && normalizeProvider(o.provider) !== provider) continue;
      const prices = fromOverride(o);
      // An override states the standard prices only: a span of another tier or region is left unpriced.
      return resolvedPrice(
        { source: prices.source, provider: o.provider === '' ? provider : normalizeProvider(o.provider), model: o.model, merged: undefined },
        (v) =>
          v.tier === '' && v.region === ''
            ? prices
            : { missing: `no ${v.tier === '' ? `price in region ${v.region}` : `${v.tier} tier price`} in override ${o.id}` },
      );
    }
    return null;
  }

  private fromCatalog(provider: string, model: string, atMs: number): ResolvedPrice | null {
    const attempts: [string, string][] = [[provider, model]];
    const slash = model.indexOf('/');
    if (slash > 0) attempts.push([provider === '' ? normalizeProvider(model.slice(0, slash)) : provider, model.slice(slash + 1)]);
    for (const [p, m] of attempts) {
      const r = this.lookup(p, m, atMs);
      if (r !== null) return r;
    }
    return null;
  }

  /** The catalog's model for a name at an instant (genai-prices' match rules), with its entry in force. */
  private catalogMatch(provider: string, model: string, atMs: number): { provider: string; model: ModelInfo; inForce: ReturnType<typeof catalogEntry> } | null {
    const timestamp = new Date(atMs);
    const probe = (providerId?: string) => {
      try {
        // A probe usage: only the match and the price in force are used, never the float result.
        return calcPrice({ input_tokens: 1 }, model, providerId === undefined ? { timestamp } : { providerId, timestamp });
      } catch {
        return null;
      }
    };
    const known = (id: string | undefined): id is string => id !== undefined && id !== '' && findProvider({ providerId: id }) !== undefined;
    let r = known(provider) ? probe(provider) : null;
    const fallback = PROVIDER_FALLBACKS[provider];
    if (r === null && known(fallback)) r = probe(fallback);
    if (r === null) r = probe();
    if (r === null) return null;
    return { provider: r.provider.id, model: r.model, inForce: catalogEntry(r.model, r.model_price) };
  }

  /** Records of a model of its own (an alias, a provider the catalog lacks) naming this model, in force at `atMs`. */
  private ownRecords(providers: readonly string[], model: string, atMs: number): number[] {
    const out: number[] = [];
    for (const p of new Set(providers)) {
      for (const i of this.ownModels.get(p) ?? []) {
        const a = this.adoptions[i] as Adoption;
        if (dayMs(a.from) <= atMs && matches(a.match ?? { equals: a.model }, model)) out.push(i);
      }
    }
    return out;
  }

  /** What prices a name at an instant: the catalog's model and its entry in force, and the dated records that apply. */
  basis(provider: string, model: string, atMs: number): PriceBasis | null {
    const cat = this.catalogMatch(provider, model, atMs);
    const inForce = (ids: readonly number[] | undefined) => (ids ?? []).filter((i) => dayMs((this.adoptions[i] as Adoption).from) <= atMs);
    const own = this.ownRecords(provider === '' ? [...this.ownModels.keys()] : [provider, cat?.provider ?? provider], model, atMs);
    if (cat === null && own.length === 0) return null;
    const catalogModel = cat === null ? [] : inForce(this.byModel.get(`${cat.provider}\u0000${cat.model.id}`));
    const owner = own.length > 0 ? (this.adoptions[own[own.length - 1] as number] as Adoption) : undefined;
    const ruleProviders = cat === null || cat.provider === provider ? [provider] : [provider, cat.provider];
    const rules = inForce(ruleProviders.flatMap((p) => this.everyModel.get(p) ?? []));
    return {
      catalog: cat === null ? null : { provider: cat.provider, model: cat.model.id, entry: cat.inForce },
      records: [...catalogModel, ...own, ...rules],
      provider: owner?.provider ?? (cat as NonNullable<typeof cat>).provider,
      model: owner?.model ?? (cat as NonNullable<typeof cat>).model.id,
    };
  }

  /** A dated record the engine holds, by its index in `basis().records`. */
  adoptionAt(index: number): Adoption | undefined {
    return this.adoptions[index];
  }

  private lookup(provider: string, model: string, atMs: number): ResolvedPrice | null {
    const b = this.basis(provider, model, atMs);
    if (b === null) return null;
    const id = `${b.catalog?.provider ?? ''}\u0000${b.catalog?.model ?? ''}\u0000${b.catalog?.entry.index ?? ''}\u0000${b.records.join(',')}`;
    let byPrice = this.interned.get(id);
    if (byPrice !== undefined) return byPrice;
    const tag = this.catalogVersion;
    const merged = mergePrices(
      b.catalog === null ? undefined : { entry: b.catalog.entry, tag },
      b.records.map((index) => ({ index, adoption: this.adoptions[index] as Adoption })),
    );
    byPrice = resolvedPrice({ source: `catalog:${tag}`, provider: b.provider, model: b.model, merged }, (v) => unitPrices(merged, v, tag));
    this.interned.set(id, byPrice);
    return byPrice;
  }

  /** The hot path: exact costs of one span. */
  price(span: Span, orgId: string): SpanCosts {
    if (span.modelId === undefined || span.modelId === '') return UNPRICED;
    const resolved = this.resolve(orgId, span.provider, span.modelId, span.startTime);
    if (resolved === null) return UNPRICED;
    const noVariant = span.serviceTier === undefined && span.batch === undefined && span.region === undefined;
    const prices = noVariant ? resolved.prices : resolved.variant(variantOf(span, resolved.provider));
    if (isNoPrices(prices)) return UNPRICED;
    return costsFor(span.usage, prices);
  }

  /** Why a span of this model, tier and region would be left unpriced (no price, or none for its tier, region or a bucket), or undefined. */
  whyUnpriced(q: {
    orgId: string;
    provider?: string | undefined;
    model: string;
    at: number;
    serviceTier?: string | undefined;
    region?: string | undefined;
    usage?: Usage;
  }): string | undefined {
    const r = this.resolve(q.orgId, q.provider, q.model, q.at);
    if (r === null) return 'no price for the model';
    const prices = r.variant(variantOf({ serviceTier: q.serviceTier, region: q.region, provider: q.provider, modelId: q.model }, r.provider));
    if (isNoPrices(prices)) return prices.missing;
    const u = q.usage ?? {};
    const missing = TOKEN_BUCKETS.filter((b) => (u[b.field] ?? 0) > 0 && prices.tokens[b.name] === undefined).map((b) => b.name);
    return missing.length === 0 ? undefined : `no ${missing.join(', ')} price`;
  }

  /** Unit prices as text for `prices show`, in the variant a span of this service tier and region would be priced in. */
  quote(q: {
    orgId: string;
    provider?: string | undefined;
    model: string;
    at: number;
    usage?: Usage;
    serviceTier?: string | undefined;
    region?: string | undefined;
  }): PriceQuote | null {
    const r = this.resolve(q.orgId, q.provider, q.model, q.at);
    if (r === null) return null;
    const variant = variantOf({ serviceTier: q.serviceTier, region: q.region, provider: q.provider, modelId: q.model }, r.provider);
    const p = r.variant(variant);
    if (isNoPrices(p)) return null;
    const prompt = promptTokens(q.usage ?? {});
    const t = p.tokens;
    const tiers = [...new Set([t.input, t.output, t.cachedInput].flatMap((x) => x?.tiers.map((y) => y.start) ?? []))].sort((a, b) => a - b);
    const over = tiers.filter((s) => prompt > s).pop();
    const at = (x: Tiered | undefined): string => (x === undefined ? '0' : formatDecimal(priceAt(x, prompt)));
    const maybe = (x: Tiered | undefined): string | null => (x === undefined ? null : formatDecimal(priceAt(x, prompt)));
    const newest = [...Object.values(p.tokenFrom), p.unitFrom].reduce<{ from: number; source: string } | undefined>(
      (a, f) => (f !== undefined && (a === undefined || f.from >= a.from) ? f : a),
      undefined,
    );
    return {
      source: newest?.source ?? p.source,
      provider: r.provider,
      model: r.model,
      tier: over === undefined ? 'base' : `> ${over} input tokens`,
      serviceTier: variant.tier,
      region: variant.region,
      inputPerMtok: at(t.input),
      cachedInputPerMtok: at(t.cachedInput),
      cacheWriteInputPerMtok: at(t.cacheWriteInput),
      outputPerMtok: at(t.output),
      reasoningPerMtok: at(t.reasoning),
      cacheWrite1hInputPerMtok: maybe(t.cacheWrite1hInput),
      audioInputPerMtok: maybe(t.audioInput),
      cachedAudioInputPerMtok: maybe(t.cachedAudioInput),
      audioOutputPerMtok: maybe(t.audioOutput),
      imageEach: formatDecimal(p.imageEach),
      webSearchEach: formatDecimal(p.webSearchEach),
      requestEach: formatDecimal(p.requestEach),
      fallbacks: p.fallbacks,
      tiers,
    };
  }
}
