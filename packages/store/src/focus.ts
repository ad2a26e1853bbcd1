import { DAY_MS, floorDay } from '@trace-ingest/shared/dates';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { USAGE_DIMENSIONS } from '@trace-ingest/shared/fields';
import { reportDialect } from './reports.js';
import type { QueryRow, SpanStore } from './span-store.js';

/**
 * Chargeback rows in the FinOps Open Cost and Usage Specification (FOCUS
 * 1.2): what a FinOps tool takes from the clouds, here from the spans. One
 * row per UTC day, trace, provider, model, price source, usage bucket and
 * unit price, so each row's ListUnitPrice times its PricingQuantity is its
 * ListCost, exactly. Generic over the usage buckets (USAGE_DIMENSIONS):
 * token buckets are priced per 1,000,000 tokens, as providers list them;
 * count buckets per unit. Costs are what trace-ingest computed at list
 * prices (or an override): billed, effective, list and contracted cost are
 * the same figure. Tags carry the trace's customer, workflow and id.
 */

export const FOCUS_VERSION = '1.2';

export type FocusType = 'String' | 'Decimal' | 'Date/Time' | 'JSON' | 'Integer';

/** The columns written, in order, with their FOCUS data type (x_ columns are this product's own). */
export const FOCUS_COLUMNS: readonly (readonly [string, FocusType])[] = [
  ['BillingAccountId', 'String'],
  ['BillingAccountName', 'String'],
  ['BillingCurrency', 'String'],
  ['BillingPeriodStart', 'Date/Time'],
  ['BillingPeriodEnd', 'Date/Time'],
  ['ChargePeriodStart', 'Date/Time'],
  ['ChargePeriodEnd', 'Date/Time'],
  ['ChargeCategory', 'String'],
  ['ChargeClass', 'String'],
  ['ChargeDescription', 'String'],
  ['ChargeFrequency', 'String'],
  ['ProviderName', 'String'],
  ['PublisherName', 'String'],
  ['InvoiceIssuerName', 'String'],
  ['ServiceCategory', 'String'],
  ['ServiceSubcategory', 'String'],
  ['ServiceName', 'String'],
  ['SkuId', 'String'],
  ['SkuMeter', 'String'],
  ['SkuPriceId', 'String'],
  ['PricingCategory', 'String'],
  ['PricingQuantity', 'Decimal'],
  ['PricingUnit', 'String'],
  ['ListUnitPrice', 'Decimal'],
  ['ContractedUnitPrice', 'Decimal'],
  ['ConsumedQuantity', 'Decimal'],
  ['ConsumedUnit', 'String'],
  ['ListCost', 'Decimal'],
  ['ContractedCost', 'Decimal'],
  ['BilledCost', 'Decimal'],
  ['EffectiveCost', 'Decimal'],
  ['Tags', 'JSON'],
  ['x_PriceSource', 'String'],
  ['x_Spans', 'Integer'],
];

export const FOCUS_COLUMN_NAMES = FOCUS_COLUMNS.map(([n]) => n);

/** A FOCUS row: decimals as exact strings, Tags as an object. */
export type FocusRecord = Record<string, string | number | null | Record<string, string>>;

/** How each type is written to Parquet (exact decimals, UTC instants). */
const PARQUET_TYPES: Record<FocusType, string> = {
  String: 'VARCHAR',
  Decimal: 'DECIMAL(38,18)',
  'Date/Time': 'TIMESTAMPTZ',
  JSON: 'JSON',
  Integer: 'BIGINT',
};

/** The columns as DuckDB's read_json takes them. */
export function focusJsonColumns(): string {
  return `{${FOCUS_COLUMNS.map(([n, t]) => `'${n}': '${PARQUET_TYPES[t]}'`).join(', ')}}`;
}

interface Bucket {
  column: string;
  cost: string;
  /** Units of quantity one list price is for (1,000,000 tokens, or 1). */
  per: bigint;
  unit: string;
  consumedUnit: string;
  meter: string;
  sku: string;
}

const title = (s: string): string => s.replace(/(^|_)([a-z])/g, (_m, sep: string, c: string) => (sep === '' ? '' : ' ') + c.toUpperCase());
const plural = (s: string): string => (/(s|x|ch|sh)$/.test(s) ? `${s}es` : `${s}s`);

/** Each priced usage bucket, named for FOCUS: `input_tokens` is SKU `input`, per 1000000 Tokens; `image_count` is `image`, per Images. */
const BUCKETS: readonly Bucket[] = USAGE_DIMENSIONS.flatMap((d): Bucket[] => {
  if (d.cost === undefined) return [];
  const tokens = d.column.endsWith('_tokens');
  const name = d.column.replace(/_(tokens|count)$/, '');
  const noun = tokens ? 'Tokens' : plural(title(name));
  return [
    {
      column: d.column,
      cost: d.cost,
      per: tokens ? 1_000_000n : 1n,
      unit: tokens ? '1000000 Tokens' : noun,
      consumedUnit: noun,
      meter: tokens ? `${title(name)} Tokens` : noun,
      sku: name,
    },
  ];
});

const SCALE = 10n ** 18n;
const instant = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

export interface FocusFilter {
  orgId: string;
  orgName: string;
  /** Epoch ms, inclusive. */
  from: number;
  /** Epoch ms, exclusive. */
  to: number;
}

/** The spans of one window, only the columns a charge needs, in trace order: a trace's rows come together. */
function sourceQuery(kind: SpanStore['kind'], f: { orgId: string; from: number; to: number }): { sql: string; params: unknown[] } {
  const dialect = reportDialect(kind);
  const cols = [
    'trace_id',
    'customer_id',
    'workflow_name',
    'provider',
    'model_id',
    'price_source',
    ...BUCKETS.map((b) => b.column),
    ...BUCKETS.map((b) => `${dialect.text(b.cost)} AS ${b.cost}`),
  ];
  const inner = `(SELECT * FROM ${dialect.from} WHERE org_id = ? AND start_time >= ? AND start_time < ?) s`;
  return { sql: `SELECT ${cols.join(', ')} FROM ${inner} ORDER BY trace_id`, params: [f.orgId, f.from, f.to] };
}

interface Charge {
  provider: string;
  model: string;
  priceSource: string;
  bucket: Bucket;
  /** The list price of `per` units, scaled; null when the cost is not an exact multiple of one. */
  unitPrice: bigint | null;
  quantity: bigint;
  cost: bigint;
  spans: number;
}

/**
 * A span's charge key for one bucket: the unit price is the cost over the
 * quantity, exact whenever the price was (a price per million tokens with
 * up to 12 decimals is); a span whose cost is not gets a row of its own.
 */
function unitPrice(cost: bigint, quantity: bigint, per: bigint): bigint | null {
  if (quantity === 0n) return cost === 0n ? 0n : null;
  return (cost * per) % quantity === 0n ? (cost * per) / quantity : null;
}

/** The FOCUS rows of one trace's charges in one window. */
function records(
  f: FocusFilter,
  window: { from: number; to: number },
  trace: { id: string; customer: string; workflow: string },
  charges: Charge[],
): FocusRecord[] {
  const d = new Date(window.from);
  const billingFrom = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  const billingTo = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  const tags: Record<string, string> = {
    ...(trace.customer === '' ? {} : { customer: trace.customer }),
    ...(trace.workflow === '' ? {} : { workflow: trace.workflow }),
    trace: trace.id,
  };
  return charges.map((c) => {
    const provider = c.provider === '' ? 'unknown' : c.provider;
    const model = c.model === '' ? 'unknown' : c.model;
    const sku = `${provider}/${model}/${c.bucket.sku}`;
    const unit = c.unitPrice === null ? null : formatDecimal(c.unitPrice);
    const cost = formatDecimal(c.cost);
    const priced = c.priceSource !== '';
    return {
      BillingAccountId: f.orgId,
      BillingAccountName: f.orgName,
      BillingCurrency: 'USD',
      BillingPeriodStart: instant(billingFrom),
      BillingPeriodEnd: instant(billingTo),
      ChargePeriodStart: instant(window.from),
      ChargePeriodEnd: instant(window.to),
      ChargeCategory: 'Usage',
      ChargeClass: null,
      ChargeDescription: `${model} ${c.bucket.meter.toLowerCase()}${priced ? '' : ' (no price known: counted as 0)'}`,
      ChargeFrequency: 'Usage-Based',
      ProviderName: provider,
      PublisherName: provider,
      InvoiceIssuerName: provider,
      ServiceCategory: 'AI and Machine Learning',
      ServiceSubcategory: 'Generative AI',
      ServiceName: model,
      SkuId: sku,
      SkuMeter: c.bucket.meter,
      SkuPriceId: `${sku}@${unit ?? 'mixed'}${priced ? ` (${c.priceSource})` : ''}`,
      PricingCategory: 'Standard',
      // Quantities are whole units of the bucket, as decimals of the pricing unit.
      PricingQuantity: formatDecimal((c.quantity * SCALE) / c.bucket.per),
      PricingUnit: c.bucket.unit,
      ListUnitPrice: unit,
      ContractedUnitPrice: unit,
      ConsumedQuantity: formatDecimal(c.quantity * SCALE),
      ConsumedUnit: c.bucket.consumedUnit,
      ListCost: cost,
      ContractedCost: cost,
      BilledCost: cost,
      EffectiveCost: cost,
      Tags: tags,
      x_PriceSource: c.priceSource,
      x_Spans: c.spans,
    };
  });
}

/**
 * An org's FOCUS rows of [from, to), a UTC day at a time (each day's
 * charges have that day, cut to the window, as their charge period), each
 * day's spans read in trace order and summed a trace at a time: memory
 * holds one trace's charges whatever the range.
 */
export async function* focusRecords(store: SpanStore, f: FocusFilter): AsyncIterable<FocusRecord> {
  for (let lo = f.from; lo < f.to;) {
    const hi = Math.min(f.to, floorDay(lo) + DAY_MS);
    const window = { from: lo, to: hi };
    const { sql, params } = sourceQuery(store.kind, { orgId: f.orgId, ...window });
    let trace: { id: string; customer: string; workflow: string } | undefined;
    let charges = new Map<string, Charge>();
    let solo = 0;
    for await (const r of store.queryStream(sql, params)) {
      const id = String(r.trace_id);
      if (trace !== undefined && trace.id !== id) {
        yield* records(f, window, trace, [...charges.values()]);
        charges = new Map();
      }
      trace = { id, customer: String(r.customer_id ?? ''), workflow: String(r.workflow_name ?? '') };
      for (const c of spanCharges(r)) {
        const key = `${c.provider}\u0000${c.model}\u0000${c.priceSource}\u0000${c.bucket.column}\u0000${c.unitPrice ?? `solo${solo++}`}`;
        const seen = charges.get(key);
        if (seen === undefined) charges.set(key, c);
        else {
          seen.quantity += c.quantity;
          seen.cost += c.cost;
          seen.spans += 1;
        }
      }
    }
    if (trace !== undefined) yield* records(f, window, trace, [...charges.values()]);
    lo = hi;
  }
}

/** A span's charges: one per bucket it used or was charged for. */
function spanCharges(r: QueryRow): Charge[] {
  const out: Charge[] = [];
  for (const b of BUCKETS) {
    const quantity = BigInt(String(r[b.column] ?? 0));
    const cost = parseDecimal(String(r[b.cost] ?? '0'));
    if (quantity === 0n && cost === 0n) continue;
    out.push({
      provider: String(r.provider ?? ''),
      model: String(r.model_id ?? ''),
      priceSource: String(r.price_source ?? ''),
      bucket: b,
      unitPrice: unitPrice(cost, quantity, b.per),
      quantity,
      cost,
      spans: 1,
    });
  }
  return out;
}

/** FOCUS rows as NDJSON lines, a chunk of whole lines at a time (what the admin socket sends, and a writer takes). */
export async function* focusLines(records: AsyncIterable<FocusRecord>, chunk = 2000): AsyncIterable<Buffer> {
  let buf: string[] = [];
  for await (const r of records) {
    buf.push(JSON.stringify(r));
    if (buf.length >= chunk) {
      yield Buffer.from(buf.join('\n') + '\n');
      buf = [];
    }
  }
  if (buf.length > 0) yield Buffer.from(buf.join('\n') + '\n');
}
