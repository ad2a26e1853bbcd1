import { PriceEngine, type PriceOverride } from '@trace-ingest/shared/price-engine';
import type { SpanPricer } from '@trace-ingest/shared/rows';
import fs from 'node:fs';
import path from 'node:path';
import { bundledCatalog, CATALOG_DIR, parseCatalog, readCatalogFile } from '@trace-ingest/shared/catalog';
import type { Adoption } from '@trace-ingest/shared/price-records';
import type { AdoptionRecord, ControlStore, PriceOverrideRecord } from './control-store-types.js';

export function toOverride(r: PriceOverrideRecord): PriceOverride {
  return {
    id: r.id,
    orgId: r.orgId,
    provider: r.provider,
    model: r.model,
    validFrom: r.validFrom,
    inputPerMtok: r.inputPerMtok,
    outputPerMtok: r.outputPerMtok,
    cachedInputPerMtok: r.cachedInputPerMtok,
    cacheWriteInputPerMtok: r.cacheWriteInputPerMtok,
    reasoningPerMtok: r.reasoningPerMtok,
    imageEach: r.imageEach,
    webSearchEach: r.webSearchEach,
    requestEach: r.requestEach,
  };
}

export interface Pricing {
  readonly engine: PriceEngine;
  /** Reloads overrides, adoptions and the catalog in force when their version changed since the last load. */
  refresh(): Promise<void>;
  readonly price: SpanPricer;
}

/** The adoptions the release ships (catalog/adoptions.json), unless the control store says otherwise for a model. */
export function releaseAdoptions(): Adoption[] {
  const file = path.join(CATALOG_DIR, 'adoptions.json');
  return fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as { adoptions: Adoption[] }).adoptions : [];
}

/** How a stored adoption keeps its history: the prices in force from its date, and the earlier ones of the same model. */
interface StoredBody {
  prices: Adoption['prices'];
  match?: Adoption['match'];
  earlier?: Pick<Adoption, 'from' | 'source' | 'prices' | 'match'>[];
}

const modelKey = (a: { provider: string; model: string }) => `${a.provider}\u0000${a.model}`;

/**
 * The adoptions in force: the release's, with the control store's on top
 * (each dated, so a later one holds from its date and the earlier ones keep
 * the days before it). A stored adoption without prices withdraws the
 * release's of that model.
 */
export function adoptionsInForce(stored: readonly AdoptionRecord[], release: readonly Adoption[] = releaseAdoptions()): Adoption[] {
  const withdrawn = new Set(stored.filter((r) => r.prices === '').map(modelKey));
  const out = release.filter((a) => !withdrawn.has(modelKey(a)));
  for (const r of stored) {
    if (r.prices === '') continue;
    const body = JSON.parse(r.prices) as StoredBody;
    for (const e of body.earlier ?? []) out.push({ provider: r.provider, model: r.model, ...e });
    out.push({ provider: r.provider, model: r.model, from: r.validFrom, source: r.source, prices: body.prices, match: body.match });
  }
  return out;
}

/**
 * Stores an adoption. A model adopted before keeps that adoption as its
 * history when the new one holds from another day (the same day: replaced),
 * so an alias that names another model from a date keeps the price of the
 * days before it.
 */
export async function storeAdoption(keys: Pick<ControlStore, 'listAdoptions' | 'setAdoption'>, a: Adoption): Promise<void> {
  const before = (await keys.listAdoptions()).find((r) => r.provider === a.provider && r.model === a.model && r.prices !== '');
  let earlier: StoredBody['earlier'] = [];
  if (before !== undefined) {
    const body = JSON.parse(before.prices) as StoredBody;
    earlier = [...(body.earlier ?? []), { from: before.validFrom, source: before.source, prices: body.prices, match: body.match }];
  }
  earlier = earlier.filter((e) => e.from !== a.from).sort((x, y) => x.from.localeCompare(y.from));
  const body: StoredBody = { prices: a.prices, match: a.match, ...(earlier.length === 0 ? {} : { earlier }) };
  await keys.setAdoption({ provider: a.provider, model: a.model, validFrom: a.from, source: a.source, prices: JSON.stringify(body) });
}

/**
 * The one way to build the price engine: the catalog in force (imported
 * with `prices import`, else PRICE_CATALOG_FILE, else the release's), the
 * adopted prices and the key store's overrides, for the server and for the
 * CLI alike. The server calls refresh() before each batch, which compares one
 * version (one indexed read), so a change made with the CLI, on any replica,
 * applies to the next request without a restart.
 */
export async function createPricing(
  keys: Pick<ControlStore, 'priceOverridesVersion' | 'listPriceOverrides' | 'activeCatalog' | 'listAdoptions'>,
  opts: { catalogFile?: string | undefined },
): Promise<Pricing> {
  const base = opts.catalogFile !== undefined ? readCatalogFile(opts.catalogFile) : bundledCatalog();
  const engine = await PriceEngine.create({ catalog: base });
  let version = '';
  let catalogId: string | null | undefined;
  let adoptionsJson = '';
  const refresh = async (): Promise<void> => {
    const v = await keys.priceOverridesVersion();
    if (v === version) return;
    const active = await keys.activeCatalog();
    const adoptions = adoptionsInForce(await keys.listAdoptions());
    const json = JSON.stringify(adoptions);
    if ((active?.id ?? null) !== catalogId || json !== adoptionsJson) {
      // A stored catalog was validated when imported; parsed again here, a damaged row leaves the last one in force.
      const catalog = active === null ? base : parseCatalog(active.data, active.source, active.date);
      await engine.use(catalog, adoptions);
      catalogId = active?.id ?? null;
      adoptionsJson = json;
    }
    engine.setOverrides((await keys.listPriceOverrides()).map(toOverride));
    version = v;
  };
  await refresh();
  return { engine, refresh, price: (span, orgId) => engine.price(span, orgId) };
}
