import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { waitForUpdate } from '@pydantic/genai-prices';
import { decimalFromNumber, divRoundHalfEven, formatDecimal, mulCountEach, mulCountPerMillion, parseDecimal } from './money.js';
import { UNPRICED, type SpanCosts } from './rows.js';
import type { Span, Usage } from './schema.js';

/**
 * Prices spans per usage dimension, exactly.
 *
 * The usage counts of a span are disjoint buckets, each multiplied by its own
 * unit price: uncached input, cache reads, cache writes, output, reasoning,
 * images, web searches, requests (totalTokens is stored, not priced). A
 * dimension without a price of its own falls back visibly (`fallbacks`):
 * reasoning to the output price, cache reads and writes to the input price
 * (a provider without a cache price bills those tokens as plain input), and a
 * per-unit dimension with no price at all is recorded as 'none'.
 *
 * Unit prices come from, in order: an override for the span's org, an
 * override for every org, the catalog (@pydantic/genai-prices, or a
 * PRICE_CATALOG_FILE in its format). The catalog's data is read directly and
 * the arithmetic is ours, in scaled BigInt: the library's own calcPrice works
 * in floats and scans match rules on every call.
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

/** Unit prices in USD as decimal strings. */
export interface UnitPrices {
  inputPerMtok: string;
  outputPerMtok: string;
  cachedInputPerMtok: string;
  cacheWriteInputPerMtok: string;
  reasoningPerMtok: string;
  imageEach: string;
  webSearchEach: string;
  requestEach: string;
  /** Prices that are not the model's own, and what they are instead: 'input', 'output' or 'none' (no price: zero). */
  fallbacks: Record<string, string>;
}

export interface PriceQuote {
  /** 'catalog:<catalogVersion>', or 'override:<id>:org' / 'override:<id>:global'. */
  source: string;
  provider: string;
  /** The matched model: the catalog's id, or the override's model. */
  model: string;
  prices: UnitPrices;
  /** Set for models with long-context tiers: which one the usage selected. */
  tier?: string;
}

export interface PriceEngineOptions {
  /** PRICE_CATALOG_FILE: a genai-prices data file (an array of providers) that replaces the built-in catalog. */
  catalogFile?: string | undefined;
  overrides?: PriceOverride[];
  /** Bound on cached resolutions; the oldest is dropped past it. */
  cacheSize?: number;
}

type UnitPriceKey = Exclude<keyof UnitPrices, 'fallbacks'>;

/** Scaled (10^18) unit prices of one tier: per million tokens, or per unit. */
interface Rates {
  input: bigint;
  cachedInput: bigint;
  cacheWriteInput: bigint;
  output: bigint;
  reasoning: bigint;
  image: bigint;
  webSearch: bigint;
  request: bigint;
}

/** One long-context tier: applies when the span's total input exceeds `above`. */
interface Level {
  above: number;
  rates: Rates;
  prices: UnitPrices;
}

/** What a (org, provider, model, time) resolves to, before usage picks the tier. */
interface Resolved {
  source: string;
  provider: string;
  model: string;
  /** Ascending by `above`; the first one's `above` is -1. */
  levels: Level[];
}

/** Cached for one 30-minute bucket; `later` holds overrides that start inside it. */
interface BucketEntry {
  first: Resolved | null;
  later: { from: number; resolved: Resolved | null }[] | undefined;
}

// Catalog prices change at UTC midnights and on :00 / :30 (off-peak windows),
// so one resolution holds for a whole 30-minute bucket.
const BUCKET_MS = 30 * 60 * 1000;

const CATALOG_PACKAGE = '@pydantic/genai-prices';

// ---------------------------------------------------------------------------
// Exact cost arithmetic

/** The exact cost columns of one span at the given unit prices. */
export function costsFor(usage: Usage | undefined, prices: UnitPrices, source: string): SpanCosts {
  return costsAtRates(usage, ratesOf(prices), source);
}

function ratesOf(p: UnitPrices): Rates {
  return {
    input: parseDecimal(p.inputPerMtok),
    cachedInput: parseDecimal(p.cachedInputPerMtok),
    cacheWriteInput: parseDecimal(p.cacheWriteInputPerMtok),
    output: parseDecimal(p.outputPerMtok),
    reasoning: parseDecimal(p.reasoningPerMtok),
    image: parseDecimal(p.imageEach),
    webSearch: parseDecimal(p.webSearchEach),
    request: parseDecimal(p.requestEach),
  };
}

function costsAtRates(usage: Usage | undefined, r: Rates, source: string): SpanCosts {
  const u = usage ?? {};
  const input = mulCountPerMillion(u.inputTokens ?? 0, r.input);
  const cached = mulCountPerMillion(u.cachedInputTokens ?? 0, r.cachedInput);
  const cacheWrite = mulCountPerMillion(u.cacheWriteInputTokens ?? 0, r.cacheWriteInput);
  const output = mulCountPerMillion(u.outputTokens ?? 0, r.output);
  const reasoning = mulCountPerMillion(u.reasoningTokens ?? 0, r.reasoning);
  const image = mulCountEach(u.imageCount ?? 0, r.image);
  const webSearch = mulCountEach(u.webSearchCount ?? 0, r.webSearch);
  const request = mulCountEach(u.requestCount ?? 0, r.request);
  return {
    input_cost: formatDecimal(input),
    output_cost: formatDecimal(output),
    reasoning_cost: formatDecimal(reasoning),
    cached_input_cost: formatDecimal(cached),
    cache_write_input_cost: formatDecimal(cacheWrite),
    image_cost: formatDecimal(image),
    web_search_cost: formatDecimal(webSearch),
    request_cost: formatDecimal(request),
    total_cost: formatDecimal(input + cached + cacheWrite + output + reasoning + image + webSearch + request),
    priced: true,
    price_source: source,
  };
}

function totalInput(usage: Usage | undefined): number {
  if (usage === undefined) return 0;
  return (usage.inputTokens ?? 0) + (usage.cachedInputTokens ?? 0) + (usage.cacheWriteInputTokens ?? 0);
}

/**
 * The tier for a span. Like genai-prices, the tier is chosen on the whole
 * prompt (uncached + cache reads + cache writes) and then prices every
 * dimension of the request: above 200k input tokens, gemini-2.5-pro's
 * output is billed at the higher rate too.
 */
function levelFor(levels: Level[], usage: Usage | undefined): Level {
  const first = levels[0] as Level;
  if (levels.length === 1) return first;
  const tokens = totalInput(usage);
  let chosen = first;
  for (const l of levels) if (tokens > l.above) chosen = l;
  return chosen;
}

function unitPricesOf(r: Rates, fallbacks: Record<string, string>): UnitPrices {
  return {
    inputPerMtok: formatDecimal(r.input),
    outputPerMtok: formatDecimal(r.output),
    cachedInputPerMtok: formatDecimal(r.cachedInput),
    cacheWriteInputPerMtok: formatDecimal(r.cacheWriteInput),
    reasoningPerMtok: formatDecimal(r.reasoning),
    imageEach: formatDecimal(r.image),
    webSearchEach: formatDecimal(r.webSearch),
    requestEach: formatDecimal(r.request),
    fallbacks,
  };
}

function level(above: number, rates: Rates, fallbacks: Record<string, string>): Level {
  return { above, rates, prices: unitPricesOf(rates, fallbacks) };
}

// ---------------------------------------------------------------------------
// The catalog, in the library's data format

type Matcher = (id: string) => boolean;

type Constraint = { kind: 'from'; atMs: number } | { kind: 'daily'; startSec: number; endSec: number };

interface CatalogModel {
  id: string;
  matches: Matcher;
  /** In file order; the last one whose constraint holds applies (the library's rule). */
  prices: { constraint: Constraint | undefined; prices: Record<string, unknown> }[];
}

interface CatalogProvider {
  id: string;
  providerMatch: Matcher | undefined;
  modelMatch: Matcher | undefined;
  fallbackProviders: string[];
  models: CatalogModel[];
}

class CatalogFormatError extends Error {}

function fail(where: string, what: string): never {
  throw new CatalogFormatError(`${where}: ${what}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function compileMatch(logic: unknown, where: string): Matcher {
  if (!isObject(logic)) fail(where, 'expected a match rule object');
  const [kind, arg] = Object.entries(logic)[0] ?? fail(where, 'empty match rule');
  if (kind === 'or' || kind === 'and') {
    if (!Array.isArray(arg)) fail(where, `"${kind}" expects an array of rules`);
    const parts = arg.map((r, i) => compileMatch(r, `${where}.${kind}[${i}]`));
    return kind === 'or' ? (id) => parts.some((p) => p(id)) : (id) => parts.every((p) => p(id));
  }
  if (typeof arg !== 'string') fail(where, `"${kind}" expects a string`);
  const want = arg.toLowerCase();
  switch (kind) {
    case 'equals':
      return (id) => id === want;
    case 'starts_with':
      return (id) => id.startsWith(want);
    case 'ends_with':
      return (id) => id.endsWith(want);
    case 'contains':
      return (id) => id.includes(want);
    case 'regex':
      return compileRegex(arg, where);
    default:
      return fail(where, `unknown match rule "${kind}"`);
  }
}

function compileRegex(source: string, where: string): Matcher {
  try {
    const re = new RegExp(source);
    return (id) => re.test(id);
  } catch (e) {
    return fail(where, `invalid regex: ${e instanceof Error ? e.message : String(e)}`);
  }
}

// "HH:MM:SS[.fff](Z|±HH:MM)" → seconds after UTC midnight, as the library reads it.
const TIME_OF_DAY = /^(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|([+-])(\d{2}):(\d{2}))$/;

function secondsOfDay(text: unknown, where: string): number {
  const m = typeof text === 'string' ? TIME_OF_DAY.exec(text) : null;
  if (m === null) fail(where, `expected a time of day like "16:30:00Z", got ${JSON.stringify(text)}`);
  const local = Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]);
  const offset = m[4] === 'Z' ? 0 : (m[5] === '-' ? -1 : 1) * (Number(m[6]) * 3600 + Number(m[7]) * 60);
  return (local - offset + 86_400) % 86_400;
}

function compileConstraint(c: unknown, where: string): Constraint | undefined {
  if (c === undefined) return undefined;
  if (!isObject(c)) fail(where, 'expected a constraint object');
  if (c.start_date !== undefined) {
    const atMs = typeof c.start_date === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(c.start_date) ? Date.parse(`${c.start_date}T00:00:00Z`) : NaN;
    if (Number.isNaN(atMs)) fail(where, `expected start_date YYYY-MM-DD, got ${JSON.stringify(c.start_date)}`);
    return { kind: 'from', atMs };
  }
  if (c.start_time !== undefined || c.end_time !== undefined) {
    return { kind: 'daily', startSec: secondsOfDay(c.start_time, `${where}.start_time`), endSec: secondsOfDay(c.end_time, `${where}.end_time`) };
  }
  return fail(where, 'expected start_date, or start_time and end_time');
}

function checkPriceValue(v: unknown, where: string): void {
  const ok = (n: unknown): boolean => typeof n === 'number' && Number.isFinite(n) && n >= 0;
  if (ok(v)) return;
  if (isObject(v) && ok(v.base) && Array.isArray(v.tiers) && v.tiers.every((t) => isObject(t) && ok(t.price) && Number.isSafeInteger(t.start))) return;
  fail(where, 'expected a non-negative number or {base, tiers: [{start, price}]}');
}

function compilePrices(v: unknown, where: string): Record<string, unknown> {
  if (!isObject(v)) fail(where, 'expected an object of prices');
  for (const [k, p] of Object.entries(v)) if (p !== undefined) checkPriceValue(p, `${where}.${k}`);
  return v;
}

function compileModel(m: unknown, where: string): CatalogModel {
  if (!isObject(m) || typeof m.id !== 'string') fail(where, 'expected a model with a string id');
  const list = Array.isArray(m.prices) ? m.prices : [{ prices: m.prices }];
  return {
    id: m.id,
    matches: compileMatch(m.match, `${where}.match`),
    prices: list.map((e: unknown, i) => {
      const at = Array.isArray(m.prices) ? `${where}.prices[${i}]` : `${where}.prices`;
      if (!isObject(e)) fail(at, 'expected {constraint?, prices}');
      return { constraint: compileConstraint(e.constraint, `${at}.constraint`), prices: compilePrices(e.prices, Array.isArray(m.prices) ? `${at}.prices` : at) };
    }),
  };
}

function compileProvider(p: unknown, where: string): CatalogProvider {
  if (!isObject(p) || typeof p.id !== 'string' || !Array.isArray(p.models)) fail(where, 'expected a provider with a string id and a models array');
  const fallbacks = p.fallback_model_providers ?? [];
  if (!Array.isArray(fallbacks) || !fallbacks.every((f) => typeof f === 'string')) fail(`${where}.fallback_model_providers`, 'expected an array of provider ids');
  return {
    id: p.id,
    providerMatch: p.provider_match === undefined ? undefined : compileMatch(p.provider_match, `${where}.provider_match`),
    modelMatch: p.model_match === undefined ? undefined : compileMatch(p.model_match, `${where}.model_match`),
    fallbackProviders: fallbacks,
    models: p.models.map((m: unknown, i) => compileModel(m, `${where}.models[${i}]`)),
  };
}

function compileCatalog(data: unknown, where: string): CatalogProvider[] {
  if (!Array.isArray(data) || data.length === 0) fail(where, 'expected a non-empty array of providers (the genai-prices data format)');
  return data.map((p: unknown, i) => compileProvider(p, `${where}[${i}]`));
}

// Taken before any caller can replace the library's active data with
// updatePrices(): on first use the library resolves to the data compiled into
// the package. Nothing here fetches.
const BUILT_IN_DATA: unknown = await waitForUpdate();
let builtInCatalog: CatalogProvider[] | undefined;

function builtIn(): CatalogProvider[] {
  builtInCatalog ??= compileCatalog(BUILT_IN_DATA, CATALOG_PACKAGE);
  return builtInCatalog;
}

function catalogPackageVersion(): string {
  const entry = createRequire(import.meta.url).resolve(CATALOG_PACKAGE);
  const pkg = JSON.parse(fs.readFileSync(path.join(path.dirname(entry), '..', 'package.json'), 'utf8')) as { name?: string; version?: string };
  if (pkg.name !== CATALOG_PACKAGE || typeof pkg.version !== 'string') throw new Error(`cannot read the version of ${CATALOG_PACKAGE}`);
  return pkg.version;
}

function loadCatalogFile(file: string): { providers: CatalogProvider[]; version: string } {
  let raw: string;
  try {
    raw = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`PRICE_CATALOG_FILE ${file}: cannot read it: ${e instanceof Error ? e.message : String(e)}`);
  }
  let data: unknown;
  try {
    data = JSON.parse(raw);
  } catch (e) {
    throw new Error(`PRICE_CATALOG_FILE ${file}: not JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  try {
    const providers = compileCatalog(data, 'providers');
    return { providers, version: `file:${path.basename(file)}@sha256:${createHash('sha256').update(raw).digest('hex').slice(0, 12)}` };
  } catch (e) {
    if (e instanceof CatalogFormatError) throw new Error(`PRICE_CATALOG_FILE ${file}: not a genai-prices data file: ${e.message}`);
    throw e;
  }
}

/** The price entry in force at `atMs`: the last whose constraint holds, else the first. */
function pricesAt(model: CatalogModel, atMs: number): Record<string, unknown> {
  const list = model.prices;
  for (let i = list.length - 1; i >= 0; i--) {
    const e = list[i] as CatalogModel['prices'][number];
    if (e.constraint === undefined || holds(e.constraint, atMs)) return e.prices;
  }
  return (list[0] as CatalogModel['prices'][number]).prices;
}

function holds(c: Constraint, atMs: number): boolean {
  if (c.kind === 'from') return atMs >= c.atMs;
  const sec = (((atMs % 86_400_000) + 86_400_000) % 86_400_000) / 1000;
  return c.endSec < c.startSec ? sec >= c.startSec || sec < c.endSec : sec >= c.startSec && sec < c.endSec;
}

// ---------------------------------------------------------------------------
// Catalog prices → tiers of scaled rates

interface Tiered {
  base: bigint;
  tiers: { start: number; price: bigint }[];
}

function tieredOf(v: unknown): Tiered | undefined {
  if (typeof v === 'number') return { base: decimalFromNumber(v), tiers: [] };
  if (!isObject(v) || typeof v.base !== 'number' || !Array.isArray(v.tiers)) return undefined;
  const tiers = (v.tiers as { start: number; price: number }[]).map((t) => ({ start: t.start, price: decimalFromNumber(t.price) }));
  return { base: decimalFromNumber(v.base), tiers: tiers.sort((a, b) => a.start - b.start) };
}

/** The price in force for any total input above `above` (and below the next threshold). */
function tierPrice(t: Tiered, above: number): bigint {
  let p = t.base;
  for (const tier of t.tiers) if (tier.start <= above) p = tier.price;
  return p;
}

/** A per-thousand price (`*_kcount`) as a price each. */
function perThousand(v: unknown): bigint | undefined {
  const t = tieredOf(v);
  return t === undefined ? undefined : divRoundHalfEven(t.base, 1000n);
}

function catalogLevels(p: Record<string, unknown>): Level[] {
  const fallbacks: Record<string, string> = {};
  const own = (key: string): Tiered | undefined => tieredOf(p[key]);
  const orElse = (t: Tiered | undefined, field: UnitPriceKey, fb: Tiered, fbName: string): Tiered => {
    if (t !== undefined) return t;
    fallbacks[field] = fbName;
    return fb;
  };
  const zero: Tiered = { base: 0n, tiers: [] };
  const input = own('input_mtok') ?? zero;
  const output = own('output_mtok') ?? zero;
  const token = {
    input,
    // Anthropic's 5-minute write price; the 1-hour price needs a count we do not receive.
    cacheWriteInput: orElse(own('cache_write_mtok'), 'cacheWriteInputPerMtok', input, 'input'),
    cachedInput: orElse(own('cache_read_mtok'), 'cachedInputPerMtok', input, 'input'),
    output,
    reasoning: orElse(own('output_reasoning_mtok'), 'reasoningPerMtok', output, 'output'),
  };
  const each = (v: bigint | undefined, field: UnitPriceKey): bigint => {
    if (v === undefined) fallbacks[field] = 'none';
    return v ?? 0n;
  };
  const image = each(undefined, 'imageEach');
  const webSearch = each(perThousand(p.web_searches_kcount ?? p.web_search_kcount), 'webSearchEach');
  const request = each(perThousand(p.requests_kcount), 'requestEach');
  const thresholds = [...new Set(Object.values(token).flatMap((t) => t.tiers.map((x) => x.start)))].sort((a, b) => a - b);
  return [-1, ...thresholds].map((above) =>
    level(
      above,
      {
        input: tierPrice(token.input, above),
        cachedInput: tierPrice(token.cachedInput, above),
        cacheWriteInput: tierPrice(token.cacheWriteInput, above),
        output: tierPrice(token.output, above),
        reasoning: tierPrice(token.reasoning, above),
        image,
        webSearch,
        request,
      },
      fallbacks,
    ),
  );
}

// ---------------------------------------------------------------------------
// Overrides

interface CompiledOverride {
  id: string;
  orgId: string;
  provider: string;
  model: string;
  validFrom: number;
  levels: Level[];
}

function overridePrice(o: PriceOverride, field: keyof PriceOverride, value: string): bigint {
  let v: bigint;
  try {
    v = parseDecimal(value);
  } catch (e) {
    throw new Error(`price override ${o.id}: ${field}: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (v < 0n) throw new Error(`price override ${o.id}: ${field} must not be negative`);
  return v;
}

function compileOverride(o: PriceOverride): CompiledOverride {
  const fallbacks: Record<string, string> = {};
  const opt = (field: UnitPriceKey, fb: bigint | undefined, fbName: string): bigint => {
    const text = o[field];
    if (text !== null) return overridePrice(o, field, text);
    fallbacks[field] = fbName;
    return fb ?? 0n;
  };
  const input = overridePrice(o, 'inputPerMtok', o.inputPerMtok);
  const output = overridePrice(o, 'outputPerMtok', o.outputPerMtok);
  const rates: Rates = {
    input,
    output,
    cachedInput: opt('cachedInputPerMtok', input, 'input'),
    cacheWriteInput: opt('cacheWriteInputPerMtok', input, 'input'),
    reasoning: opt('reasoningPerMtok', output, 'output'),
    image: opt('imageEach', undefined, 'none'),
    webSearch: opt('webSearchEach', undefined, 'none'),
    request: opt('requestEach', undefined, 'none'),
  };
  return {
    id: o.id,
    orgId: o.orgId,
    provider: o.provider === '' ? '' : normalizeProvider(o.provider),
    model: o.model.trim().toLowerCase(),
    validFrom: o.validFrom,
    levels: [level(-1, rates, fallbacks)],
  };
}

// ---------------------------------------------------------------------------
// Names

// Provider names used by tracing conventions (OpenTelemetry gen_ai.system,
// LiteLLM, OpenInference) that the catalog neither lists nor matches.
const PROVIDER_ALIASES: Readonly<Record<string, string>> = {
  x_ai: 'x-ai',
  xai: 'x-ai',
  'gcp.gen_ai': 'google',
  'gcp.gemini': 'google',
  'gcp.vertex_ai': 'google',
  vertex_ai: 'google',
  google_genai: 'google',
  'az.ai.inference': 'azure',
  'azure.ai.inference': 'azure',
  'azure.ai.openai': 'azure',
  azure_openai: 'azure',
  azure_ai: 'azure',
  'aws.bedrock': 'aws',
  bedrock: 'aws',
  mistral_ai: 'mistral',
  mistralai: 'mistral',
  fireworks_ai: 'fireworks',
  'fireworks-ai': 'fireworks',
  together_ai: 'together',
  moonshot: 'moonshotai',
  voyage: 'voyageai',
};

/** A provider name as the catalog spells it (lower case, aliases mapped). */
export function normalizeProvider(p: string | undefined): string {
  if (p === undefined) return '';
  const lower = p.trim().toLowerCase();
  return PROVIDER_ALIASES[lower] ?? lower;
}

// Model makers that sell their own models: with no provider given, a model id
// that no provider's model_match claims (text-embedding-3-small) is looked up
// by its exact id among these. Open-weight models stay unmatched: their price
// depends on the host.
const FIRST_PARTY = ['openai', 'anthropic', 'google', 'mistral', 'cohere', 'deepseek', 'x-ai', 'voyageai', 'moonshotai', 'zhipuai', 'minimax'];

// The library's date rule: claude-sonnet-4-20250514 is listed as claude-sonnet-4-2025-05-14 too.
const COMPACT_DATE = /(-)(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?=-|:|$)/g;

function withDashedDate(model: string): string {
  return model.replace(COMPACT_DATE, (all: string, dash: string, y: string, m: string, d: string) => {
    const t = new Date(Date.UTC(Number(y), Number(m) - 1, Number(d)));
    return t.getUTCMonth() === Number(m) - 1 && t.getUTCDate() === Number(d) ? `${dash}${y}-${m}-${d}` : all;
  });
}

/** The (provider, model) pairs to try, in order: as sent, then without a `provider/` prefix. */
function candidates(provider: string, model: string): [string, string][] {
  const out: [string, string][] = [[provider, model]];
  const slash = model.indexOf('/');
  if (slash > 0 && slash < model.length - 1) out.push([provider === '' ? normalizeProvider(model.slice(0, slash)) : provider, model.slice(slash + 1)]);
  return out;
}

// ---------------------------------------------------------------------------
// The engine

interface CatalogMatch {
  provider: string;
  model: CatalogModel;
}

export class PriceEngine {
  readonly catalogVersion: string;
  private readonly providers: CatalogProvider[];
  private readonly byId: Map<string, CatalogProvider>;
  private readonly catalogSource: string;
  private readonly cacheSize: number;
  private readonly cache = new Map<string, BucketEntry>();
  private overrides: CompiledOverride[] = [];

  constructor(opts: PriceEngineOptions = {}) {
    if (opts.catalogFile !== undefined && opts.catalogFile !== '') {
      const loaded = loadCatalogFile(opts.catalogFile);
      this.providers = loaded.providers;
      this.catalogVersion = loaded.version;
    } else {
      this.providers = builtIn();
      this.catalogVersion = `genai-prices@${catalogPackageVersion()}`;
    }
    this.byId = new Map(this.providers.map((p) => [p.id, p]));
    this.catalogSource = `catalog:${this.catalogVersion}`;
    this.cacheSize = Math.max(1, opts.cacheSize ?? 50_000);
    this.setOverrides(opts.overrides ?? []);
  }

  /** Replaces every override; resolutions made with the old ones are dropped. */
  setOverrides(list: PriceOverride[]): void {
    this.overrides = list.map(compileOverride);
    this.cache.clear();
  }

  /**
   * The unit prices that apply (for `prices show`): an override for the org,
   * else one for every org, else the catalog. Among overrides the one in force
   * is the latest with validFrom <= at; one for a named provider beats one for
   * any provider at the same level. With usage, the long-context tier it selects.
   */
  quote(q: { orgId: string; provider?: string | undefined; model: string; at: number; usage?: Usage | undefined }): PriceQuote | null {
    const r = this.resolved(q.orgId, q.provider, q.model, q.at);
    if (r === null) return null;
    const chosen = levelFor(r.levels, q.usage);
    const quote: PriceQuote = { source: r.source, provider: r.provider, model: r.model, prices: chosen.prices };
    if (r.levels.length > 1) quote.tier = chosen.above < 0 ? `input tokens <= ${(r.levels[1] as Level).above}` : `input tokens > ${chosen.above}`;
    return quote;
  }

  /** The hot path: the exact cost columns of one span. */
  price(span: Span, orgId: string): SpanCosts {
    const model = span.modelId;
    if (model === undefined || model.trim() === '') return UNPRICED;
    const r = this.resolved(orgId, span.provider, model, span.startTime);
    if (r === null) return UNPRICED;
    return costsAtRates(span.usage, levelFor(r.levels, span.usage).rates, r.source);
  }

  private resolved(orgId: string, provider: string | undefined, model: string, at: number): Resolved | null {
    const bucket = Math.floor(at / BUCKET_MS);
    const key = `${orgId}\n${provider ?? ''}\n${model}\n${bucket}`;
    let entry = this.cache.get(key);
    if (entry === undefined) {
      entry = this.resolveBucket(orgId, provider, model, bucket * BUCKET_MS);
      if (this.cache.size >= this.cacheSize) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.set(key, entry);
    }
    if (entry.later === undefined) return entry.first;
    let r = entry.first;
    for (const step of entry.later) if (step.from <= at) r = step.resolved;
    return r;
  }

  /** Resolves at the bucket's start, and again wherever an override starts inside the bucket. */
  private resolveBucket(orgId: string, provider: string | undefined, model: string, start: number): BucketEntry {
    const end = start + BUCKET_MS;
    const starts = [...new Set(this.overrides.map((o) => o.validFrom).filter((v) => v > start && v < end))].sort((a, b) => a - b);
    const first = this.resolveAt(orgId, provider, model, start);
    if (starts.length === 0) return { first, later: undefined };
    return { first, later: starts.map((from) => ({ from, resolved: this.resolveAt(orgId, provider, model, from) })) };
  }

  private resolveAt(orgId: string, providerName: string | undefined, modelName: string, at: number): Resolved | null {
    const pairs = candidates(normalizeProvider(providerName), modelName.trim().toLowerCase());
    const found = this.matchCatalog(pairs);
    const override = this.overrideFor(orgId, pairs, found, at);
    if (override !== undefined) {
      const scope = override.orgId === '' ? 'global' : 'org';
      const provider = override.provider !== '' ? override.provider : (found?.provider ?? (pairs.at(-1) as [string, string])[0]);
      return { source: `override:${override.id}:${scope}`, provider, model: override.model, levels: override.levels };
    }
    if (found === undefined) return null;
    return { source: this.catalogSource, provider: found.provider, model: found.model.id, levels: catalogLevels(pricesAt(found.model, at)) };
  }

  private overrideFor(orgId: string, pairs: [string, string][], found: CatalogMatch | undefined, at: number): CompiledOverride | undefined {
    if (this.overrides.length === 0) return undefined;
    const models = new Set(pairs.map(([, m]) => m));
    const providers = new Set(pairs.map(([p]) => p));
    if (found !== undefined) {
      models.add(found.model.id.toLowerCase());
      providers.add(found.provider);
    }
    let best: CompiledOverride | undefined;
    let bestRank = -1;
    for (const o of this.overrides) {
      if (o.validFrom > at || !models.has(o.model) || (o.orgId !== '' && o.orgId !== orgId)) continue;
      if (o.provider !== '' && !providers.has(o.provider)) continue;
      const rank = (o.orgId !== '' ? 2 : 0) + (o.provider !== '' ? 1 : 0);
      if (rank > bestRank || (rank === bestRank && best !== undefined && o.validFrom > best.validFrom)) {
        best = o;
        bestRank = rank;
      }
    }
    return best;
  }

  private matchCatalog(pairs: [string, string][]): CatalogMatch | undefined {
    for (const [provider, model] of pairs) {
      const found = this.match(provider, model);
      if (found !== undefined) return found;
    }
    return undefined;
  }

  /**
   * The library's matching rules: a named provider (by id or its
   * provider_match) is searched alone, with its fallback providers; an
   * unknown name is ignored; with no provider, the one whose model_match
   * claims the id. Each search retries a compact date as a dashed one.
   */
  private match(provider: string, model: string): CatalogMatch | undefined {
    if (provider !== '') {
      const p = this.findProvider(provider);
      if (p !== undefined) return this.inProvider(p, model);
    }
    const claimed = this.providers.find((p) => p.modelMatch?.(model) === true);
    const found = claimed === undefined ? undefined : this.inProvider(claimed, model);
    return found ?? this.inFirstParty(model);
  }

  private findProvider(name: string): CatalogProvider | undefined {
    return this.byId.get(name) ?? this.providers.find((p) => p.providerMatch?.(name) === true);
  }

  private inProvider(p: CatalogProvider, model: string): CatalogMatch | undefined {
    const m = this.modelIn(p, model) ?? this.modelIn(p, withDashedDate(model));
    return m === undefined ? undefined : { provider: p.id, model: m };
  }

  private modelIn(p: CatalogProvider, model: string): CatalogModel | undefined {
    const own = p.models.find((m) => m.matches(model));
    if (own !== undefined) return own;
    for (const id of p.fallbackProviders) {
      const m = this.byId.get(id)?.models.find((x) => x.matches(model));
      if (m !== undefined) return m;
    }
    return undefined;
  }

  /** Only an exact id: a looser rule would price a Bedrock or Vertex id at some other host's rate. */
  private inFirstParty(model: string): CatalogMatch | undefined {
    const dashed = withDashedDate(model);
    for (const id of FIRST_PARTY) {
      const p = this.byId.get(id);
      const m = p?.models.find((x) => x.id.toLowerCase() === model || x.id.toLowerCase() === dashed);
      if (p !== undefined && m !== undefined) return { provider: p.id, model: m };
    }
    return undefined;
  }
}
