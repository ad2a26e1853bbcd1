import { calcPrice, findProvider, updatePrices, waitForUpdate, type ModelPrice, type TieredPrices } from '@pydantic/genai-prices';
import { bundledCatalog, catalogTag, readCatalogFile, withAdoptions, type Adoption, type Catalog } from './catalog.js';
import { costEach, costPerMillion, formatDecimal, parseDecimal } from './decimal.js';
import { UNPRICED, type SpanCosts } from './rows.js';
import type { Span, Usage } from './schema.js';

/**
 * Prices spans per usage dimension, exactly.
 *
 * The nine usage counts are disjoint buckets, each multiplied by its own unit
 * price: input (uncached), cached input (cache reads), cache writes, output,
 * reasoning, images, web searches, requests; totalTokens is not priced. A
 * dimension without a price of its own falls back visibly: reasoning to the
 * output price, cache reads and writes to the input price (the provider bills
 * them as plain input when it has no cache price).
 *
 * Unit prices come from, in order: an override for the span's org, a global
 * override, the catalog (@pydantic/genai-prices' engine over a catalog data
 * file: the one the product ships, one imported with `prices import`, or
 * PRICE_CATALOG_FILE; offline) with the prices adopted from the second
 * catalog (`prices audit --adopt`). The catalog is consulted
 * once per (org, provider, model, 30-minute bucket) and the result, including
 * "no price", is cached; overrides replace the cache.
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

/** Scaled (10^18) unit prices, possibly tiered by total input tokens. */
interface Tiered {
  base: bigint;
  /** Ascending; a tier applies when the total input exceeds `start`. */
  tiers: { start: number; price: bigint }[];
}

interface UnitPriceModel {
  input: Tiered;
  cachedInput: Tiered;
  cacheWriteInput: Tiered;
  output: Tiered;
  reasoning: Tiered;
  imageEach: bigint;
  webSearchEach: bigint;
  requestEach: bigint;
  /** Dimension → the price it fell back to ('input', 'output'). */
  fallbacks: Record<string, string>;
}

export interface ResolvedPrice {
  source: string;
  provider: string;
  model: string;
  prices: UnitPriceModel;
}

/** Unit prices as text, for people (`prices show`). */
export interface PriceQuote {
  source: string;
  provider: string;
  model: string;
  /** e.g. 'base' or '> 200000 input tokens' when usage was given and picked a tier. */
  tier: string;
  inputPerMtok: string;
  cachedInputPerMtok: string;
  cacheWriteInputPerMtok: string;
  outputPerMtok: string;
  reasoningPerMtok: string;
  imageEach: string;
  webSearchEach: string;
  requestEach: string;
  fallbacks: Record<string, string>;
  /** Thresholds of long-context tiers, if any. */
  tiers: number[];
}

const BUCKET_MS = 30 * 60 * 1000;
const ZERO: Tiered = { base: 0n, tiers: [] };

// Provider ids seen in tracing conventions, mapped to the catalog's ids.
const PROVIDER_ALIASES: Record<string, string> = {
  x_ai: 'x-ai',
  xai: 'x-ai',
  'gcp.gen_ai': 'google',
  // Vertex AI bills some models apart from the Gemini API: a `google-vertex` entry (an adoption) wins where there is one.
  'gcp.vertex_ai': 'google-vertex',
  vertex_ai: 'google-vertex',
  vertexai: 'google-vertex',
  gemini: 'google',
  google_genai: 'google',
  'azure.ai.inference': 'azure',
  'azure.ai.openai': 'azure',
  azure_openai: 'azure',
  'aws.bedrock': 'aws',
  bedrock: 'aws',
  mistralai: 'mistral',
  mistral_ai: 'mistral',
  'meta-llama': 'meta',
};

/** Where a provider's models are looked up when the catalog has no entry of that provider (or of that model there). */
const PROVIDER_FALLBACKS: Record<string, string> = { 'google-vertex': 'google' };

export function normalizeProvider(p: string | undefined): string {
  if (p === undefined) return '';
  const lower = p.trim().toLowerCase();
  return PROVIDER_ALIASES[lower] ?? lower;
}

function tiered(v: number | TieredPrices | undefined): Tiered | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'number') return { base: parseDecimal(v), tiers: [] };
  return { base: parseDecimal(v.base), tiers: [...v.tiers].sort((a, b) => a.start - b.start).map((t) => ({ start: t.start, price: parseDecimal(t.price) })) };
}

function flat(v: string | null | undefined): Tiered | undefined {
  return v === null || v === undefined ? undefined : { base: parseDecimal(v), tiers: [] };
}

/** Takes a dimension's own price, or records that it fell back and to what. */
function fallbackPicker(fallbacks: Record<string, string>) {
  return (own: Tiered | undefined, dim: string, fb: Tiered, fbName: string): Tiered => {
    if (own !== undefined) return own;
    fallbacks[dim] = fbName;
    return fb;
  };
}

function fromCatalog(mp: ModelPrice): UnitPriceModel {
  const fallbacks: Record<string, string> = {};
  const input = tiered(mp.input_mtok) ?? ZERO;
  const output = tiered(mp.output_mtok) ?? ZERO;
  const pick = fallbackPicker(fallbacks);
  const perK = (v: number | TieredPrices | undefined): bigint => (typeof v === 'number' ? parseDecimal(v) / 1000n : 0n);
  return {
    input,
    cachedInput: pick(tiered(mp.cache_read_mtok), 'cachedInput', input, 'input'),
    cacheWriteInput: pick(tiered(mp.cache_write_mtok), 'cacheWriteInput', input, 'input'),
    output,
    reasoning: pick(tiered(mp.output_reasoning_mtok), 'reasoning', output, 'output'),
    imageEach: typeof mp.output_image === 'number' ? parseDecimal(mp.output_image) : 0n,
    webSearchEach: perK(mp.web_searches_kcount ?? mp.web_search_kcount),
    requestEach: perK(mp.requests_kcount),
    fallbacks,
  };
}

function fromOverride(o: PriceOverride): UnitPriceModel {
  const fallbacks: Record<string, string> = {};
  const input = flat(o.inputPerMtok) ?? ZERO;
  const output = flat(o.outputPerMtok) ?? ZERO;
  const pick = fallbackPicker(fallbacks);
  return {
    input,
    cachedInput: pick(flat(o.cachedInputPerMtok), 'cachedInput', input, 'input'),
    cacheWriteInput: pick(flat(o.cacheWriteInputPerMtok), 'cacheWriteInput', input, 'input'),
    output,
    reasoning: pick(flat(o.reasoningPerMtok), 'reasoning', output, 'output'),
    imageEach: o.imageEach === null ? 0n : parseDecimal(o.imageEach),
    webSearchEach: o.webSearchEach === null ? 0n : parseDecimal(o.webSearchEach),
    requestEach: o.requestEach === null ? 0n : parseDecimal(o.requestEach),
    fallbacks,
  };
}

function at(t: Tiered, totalInput: number): bigint {
  let p = t.base;
  for (const tier of t.tiers) if (totalInput > tier.start) p = tier.price;
  return p;
}

/** The exact cost columns of one span at the given unit prices. */
export function costsFor(usage: Usage | undefined, prices: UnitPriceModel, source: string): SpanCosts {
  const u = usage ?? {};
  const input = u.inputTokens ?? 0;
  const cached = u.cachedInputTokens ?? 0;
  const cacheWrite = u.cacheWriteInputTokens ?? 0;
  // Long-context tiers are chosen on the whole prompt, and then apply to every dimension.
  const totalInput = input + cached + cacheWrite;
  const c = {
    input: costPerMillion(input, at(prices.input, totalInput)),
    cached: costPerMillion(cached, at(prices.cachedInput, totalInput)),
    cacheWrite: costPerMillion(cacheWrite, at(prices.cacheWriteInput, totalInput)),
    output: costPerMillion(u.outputTokens ?? 0, at(prices.output, totalInput)),
    reasoning: costPerMillion(u.reasoningTokens ?? 0, at(prices.reasoning, totalInput)),
    image: costEach(u.imageCount ?? 0, prices.imageEach),
    webSearch: costEach(u.webSearchCount ?? 0, prices.webSearchEach),
    request: costEach(u.requestCount ?? 0, prices.requestEach),
  };
  const total = c.input + c.cached + c.cacheWrite + c.output + c.reasoning + c.image + c.webSearch + c.request;
  return {
    input_cost: formatDecimal(c.input),
    output_cost: formatDecimal(c.output),
    reasoning_cost: formatDecimal(c.reasoning),
    cached_input_cost: formatDecimal(c.cached),
    cache_write_input_cost: formatDecimal(c.cacheWrite),
    image_cost: formatDecimal(c.image),
    web_search_cost: formatDecimal(c.webSearch),
    request_cost: formatDecimal(c.request),
    total_cost: formatDecimal(total),
    priced: true,
    price_source: source,
  };
}

export interface PriceEngineOptions {
  /** The catalog to price with (default: the one the product ships). */
  catalog?: Catalog | undefined;
  /** A catalog data file in the library's format (an array of providers), read once; no network. */
  catalogFile?: string | undefined;
  /** Prices adopted from the second catalog. */
  adoptions?: readonly Adoption[] | undefined;
  overrides?: PriceOverride[];
  /** Bound on cached resolutions; the cache is cleared when it is reached. */
  cacheSize?: number;
}

export class PriceEngine {
  private overrides: PriceOverride[] = [];
  private readonly cache = new Map<string, ResolvedPrice | null>();
  private readonly cacheSize: number;
  private catalog: Catalog;
  private adoptions: readonly Adoption[] = [];
  /** Adoptions by (provider, model), for the source of the spans they price. */
  private adopted = new Map<string, Adoption>();
  /**
   * One resolution per catalog price object (and source, provider, model): every 30-minute bucket
   * a price is in force shares it, so a cache of a year's buckets holds pointers, not copies.
   */
  private interned = new WeakMap<object, Map<string, ResolvedPrice>>();

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

  /** The catalog's providers as the engine prices with them (adoptions merged in). */
  get providers(): Catalog['providers'] {
    return withAdoptions(this.catalog.providers, this.adoptions);
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

  /** Prices from now on with this catalog and these adoptions (genai-prices holds one data set per process). */
  async use(catalog: Catalog, adoptions: readonly Adoption[]): Promise<void> {
    const providers = withAdoptions(catalog.providers, adoptions);
    updatePrices(({ setProviderData }) => setProviderData(providers));
    await waitForUpdate();
    this.catalog = catalog;
    this.adoptions = adoptions;
    this.adopted = new Map(adoptions.map((a) => [`${a.provider}\u0000${a.model}`, a]));
    this.interned = new WeakMap();
    this.cache.clear();
  }

  get adoptionList(): readonly Adoption[] {
    return this.adoptions;
  }

  setOverrides(list: PriceOverride[]): void {
    this.overrides = [...list].sort((a, b) => b.validFrom - a.validFrom);
    this.cache.clear();
  }

  /** The prices that apply to a span of this org, provider and model at `atMs`, or null. */
  resolve(orgId: string, provider: string | undefined, model: string, atMs: number): ResolvedPrice | null {
    const p = normalizeProvider(provider);
    const bucket = Math.floor(atMs / BUCKET_MS);
    const key = orgId + '\u0000' + p + '\u0000' + model + '\u0000' + bucket;
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
      return { source: `override:${o.id}`, provider: o.provider === '' ? provider : normalizeProvider(o.provider), model: o.model, prices: fromOverride(o) };
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

  private lookup(provider: string, model: string, atMs: number): ResolvedPrice | null {
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
    const adoption = this.adopted.get(`${r.provider.id}\u0000${r.model.id}`);
    const source = adoption !== undefined && atMs >= Date.parse(`${adoption.from}T00:00:00Z`) ? `catalog:${adoption.source}` : `catalog:${this.catalogVersion}`;
    const key = `${source}\u0000${r.provider.id}\u0000${r.model.id}`;
    let byPrice = this.interned.get(r.model_price);
    if (byPrice === undefined) this.interned.set(r.model_price, (byPrice = new Map()));
    let resolved = byPrice.get(key);
    if (resolved === undefined) byPrice.set(key, (resolved = { source, provider: r.provider.id, model: r.model.id, prices: fromCatalog(r.model_price) }));
    return resolved;
  }

  /** The hot path: exact costs of one span. */
  price(span: Span, orgId: string): SpanCosts {
    if (span.modelId === undefined || span.modelId === '') return UNPRICED;
    const resolved = this.resolve(orgId, span.provider, span.modelId, span.startTime);
    if (resolved === null) return UNPRICED;
    return costsFor(span.usage, resolved.prices, resolved.source);
  }

  /** Unit prices as text for `prices show`. */
  quote(q: { orgId: string; provider?: string | undefined; model: string; at: number; usage?: Usage }): PriceQuote | null {
    const r = this.resolve(q.orgId, q.provider, q.model, q.at);
    if (r === null) return null;
    const u = q.usage ?? {};
    const totalInput = (u.inputTokens ?? 0) + (u.cachedInputTokens ?? 0) + (u.cacheWriteInputTokens ?? 0);
    const p = r.prices;
    const tiers = [...new Set([p.input, p.output, p.cachedInput].flatMap((t) => t.tiers.map((x) => x.start)))].sort((a, b) => a - b);
    const over = tiers.filter((s) => totalInput > s).pop();
    return {
      source: r.source,
      provider: r.provider,
      model: r.model,
      tier: over === undefined ? 'base' : `> ${over} input tokens`,
      inputPerMtok: formatDecimal(at(p.input, totalInput)),
      cachedInputPerMtok: formatDecimal(at(p.cachedInput, totalInput)),
      cacheWriteInputPerMtok: formatDecimal(at(p.cacheWriteInput, totalInput)),
      outputPerMtok: formatDecimal(at(p.output, totalInput)),
      reasoningPerMtok: formatDecimal(at(p.reasoning, totalInput)),
      imageEach: formatDecimal(p.imageEach),
      webSearchEach: formatDecimal(p.webSearchEach),
      requestEach: formatDecimal(p.requestEach),
      fallbacks: p.fallbacks,
      tiers,
    };
  }
}
