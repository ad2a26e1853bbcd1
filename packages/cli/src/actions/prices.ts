import { parseDateOrTime } from '@trace-ingest/shared/dates';
import { UsageError } from '@trace-ingest/shared/errors';
import { UnknownNameError } from '@trace-ingest/store/control-store';
import { parseDecimal, formatDecimal } from '@trace-ingest/shared/decimal';
import type { PriceQuote } from '@trace-ingest/shared/price-engine';
import type { PriceOverrideRecord } from '@trace-ingest/store/control-store-types';
import { createPricing } from '@trace-ingest/store/pricing';
import { reportDialect } from '@trace-ingest/store/reports';
import type { CliContext } from '../context.js';
import { openSpanAccess } from '../span-access.js';

export interface SetPriceInput {
  model: string;
  provider?: string | undefined;
  org?: string | undefined;
  from?: string | undefined;
  input: string;
  output: string;
  cachedInput?: string | undefined;
  cacheWrite?: string | undefined;
  reasoning?: string | undefined;
  image?: string | undefined;
  webSearch?: string | undefined;
  request?: string | undefined;
}

/** An override for people: org and provider by name ('*' for any), the start date as text. */
export type PriceListing = Omit<PriceOverrideRecord, 'orgId' | 'validFrom' | 'createdAt'> & { org: string; from: string };

/** A date (YYYY-MM-DD, UTC midnight) or an ISO timestamp, as epoch ms; an impossible day (2026-11-31) is refused. */
export function parseDate(text: string, flag: string): number {
  const ms = parseDateOrTime(text);
  if (ms === undefined) throw new UsageError(`${flag}: not a calendar date (use YYYY-MM-DD or an ISO timestamp): ${text}`);
  return ms;
}

function price(text: string | undefined, flag: string): string | null {
  if (text === undefined) return null;
  let v: bigint;
  try {
    v = parseDecimal(text);
  } catch {
    throw new UsageError(`${flag}: not a decimal number: ${text}`);
  }
  if (v < 0n) throw new UsageError(`${flag}: must be >= 0`);
  return formatDecimal(v);
}

async function orgIdOf(ctx: CliContext, org: string | undefined): Promise<string> {
  if (org === undefined) return '';
  const o = await (await ctx.keys()).getOrg(org);
  if (o === null) throw new UnknownNameError('org', org);
  return o.id;
}

async function listing(ctx: CliContext, r: PriceOverrideRecord): Promise<PriceListing> {
  const keys = await ctx.keys();
  const org = r.orgId === '' ? '*' : ((await keys.getOrg(r.orgId))?.name ?? r.orgId);
  const { id, provider, model, validFrom, createdAt: _createdAt, orgId: _orgId, ...prices } = r;
  return { id, org, provider: provider === '' ? '*' : provider, model, from: validFrom === 0 ? 'always' : new Date(validFrom).toISOString(), ...prices };
}

export async function setPrice(ctx: CliContext, input: SetPriceInput): Promise<PriceListing> {
  const inputPerMtok = price(input.input, '--input');
  const outputPerMtok = price(input.output, '--output');
  if (inputPerMtok === null || outputPerMtok === null) throw new UsageError('--input and --output are required');
  const rec = await (
    await ctx.keys()
  ).setPriceOverride({
    orgId: await orgIdOf(ctx, input.org),
    provider: input.provider ?? '',
    model: input.model,
    validFrom: input.from === undefined ? 0 : parseDate(input.from, '--from'),
    inputPerMtok,
    outputPerMtok,
    cachedInputPerMtok: price(input.cachedInput, '--cached-input'),
    cacheWriteInputPerMtok: price(input.cacheWrite, '--cache-write'),
    reasoningPerMtok: price(input.reasoning, '--reasoning'),
    imageEach: price(input.image, '--image'),
    webSearchEach: price(input.webSearch, '--web-search'),
    requestEach: price(input.request, '--request'),
  });
  return listing(ctx, rec);
}

export async function listPrices(ctx: CliContext): Promise<PriceListing[]> {
  const out: PriceListing[] = [];
  for (const r of await (await ctx.keys()).listPriceOverrides()) out.push(await listing(ctx, r));
  return out;
}

export async function unsetPrice(
  ctx: CliContext,
  input: { model: string; provider?: string | undefined; org?: string | undefined; from?: string | undefined },
): Promise<number> {
  const n = await (
    await ctx.keys()
  ).unsetPriceOverride({
    orgId: await orgIdOf(ctx, input.org),
    provider: input.provider ?? '',
    model: input.model,
    ...(input.from === undefined ? {} : { validFrom: parseDate(input.from, '--from') }),
  });
  if (n === 0)
    throw new UsageError(
      `no price override for model "${input.model}"${input.provider === undefined ? '' : ` provider "${input.provider}"`}` +
        `${input.org === undefined ? '' : ` org "${input.org}"`}; see "trace-ingest prices list"`,
    );
  return n;
}

/** The unit prices that would apply (to a span of this service tier and region, when given), and where they come from. */
export async function showPrice(
  ctx: CliContext,
  input: {
    model: string;
    provider?: string | undefined;
    org?: string | undefined;
    at?: string | undefined;
    tier?: string | undefined;
    region?: string | undefined;
  },
): Promise<PriceQuote & { at: string }> {
  const { engine } = await createPricing(await ctx.keys(), { catalogFile: ctx.config.PRICE_CATALOG_FILE });
  const at = input.at === undefined ? Date.now() : parseDate(input.at, '--at');
  const q = { orgId: await orgIdOf(ctx, input.org), provider: input.provider, model: input.model, at, serviceTier: input.tier, region: input.region };
  const quote = engine.quote(q);
  if (quote === null) {
    const why = engine.whyUnpriced(q);
    const variant = [input.tier === undefined ? '' : ` tier "${input.tier}"`, input.region === undefined ? '' : ` region "${input.region}"`].join('');
    throw new UsageError(
      `no price for model "${input.model}"${input.provider === undefined ? '' : ` of provider "${input.provider}"`}${variant} ` +
        `in the catalog (${engine.catalogVersion}) or the overrides${why === undefined || why === 'no price for the model' ? '' : ` (${why})`}; ` +
        'add one with "trace-ingest prices set"',
    );
  }
  return { ...quote, at: new Date(at).toISOString() };
}

export interface UnpricedModel {
  provider: string;
  model: string;
  /** The service tier and region the spans were billed in ('' when they said none). */
  serviceTier: string;
  region: string;
  spans: number;
  /** What has no price: the model, its tier or region, or a bucket its spans use (audio, one-hour cache writes). */
  why: string;
  firstSeen: string;
  lastSeen: string;
}

/** The usage buckets a span may be left unpriced for lack of a price of (the rest fall back to input or output). */
const UNFALLEN = ['cache_write_1h_input_tokens', 'audio_input_tokens', 'cached_audio_input_tokens', 'audio_output_tokens'] as const;

/** Models (and tiers and regions of them) with spans left unpriced, with counts and why, as priced now. */
export async function unpricedModels(ctx: CliContext): Promise<UnpricedModel[]> {
  const dialect = reportDialect(ctx.config.CLICKHOUSE_URL !== undefined ? 'clickhouse' : 'duckdb');
  const rows = await (
    await openSpanAccess(ctx)
  ).sql(
    `SELECT provider, model_id AS model, service_tier, region, count(*) AS spans, min(start_time) AS first_seen, max(start_time) AS last_seen, ` +
      `${UNFALLEN.map((c) => `max(${c}) AS ${c}`).join(', ')} ` +
      `FROM ${dialect.from} WHERE ${dialect.unpricedCondition} GROUP BY provider, model_id, service_tier, region ORDER BY spans DESC, model`,
  );
  const { engine } = await createPricing(await ctx.keys(), { catalogFile: ctx.config.PRICE_CATALOG_FILE });
  return rows.map((r) => {
    const serviceTier = String(r.service_tier);
    const region = String(r.region);
    const lastSeen = Number(r.last_seen);
    const why = engine.whyUnpriced({
      orgId: '',
      provider: String(r.provider),
      model: String(r.model),
      at: lastSeen,
      serviceTier,
      region,
      usage: {
        cacheWrite1hInputTokens: Number(r.cache_write_1h_input_tokens),
        audioInputTokens: Number(r.audio_input_tokens),
        cachedAudioInputTokens: Number(r.cached_audio_input_tokens),
        audioOutputTokens: Number(r.audio_output_tokens),
      },
    });
    return {
      provider: String(r.provider),
      model: String(r.model),
      serviceTier,
      region,
      spans: Number(r.spans),
      why: why ?? 'priced now ("trace-ingest reprice" prices them)',
      firstSeen: new Date(Number(r.first_seen)).toISOString(),
      lastSeen: new Date(lastSeen).toISOString(),
    };
  });
}
