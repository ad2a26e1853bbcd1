import { PriceEngine, type PriceOverride } from '@trace-ingest/shared/price-engine';
import type { SpanPricer } from '@trace-ingest/shared/rows';
import fs from 'node:fs';
import path from 'node:path';
import { bundledCatalog, CATALOG_DIR, parseCatalog, readCatalogFile, type Adoption } from '@trace-ingest/shared/catalog';
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

/**
 * The adoptions in force: the release's, replaced per (provider, model) by
 * the control store's; a stored adoption without prices withdraws the
 * release's.
 */
export function adoptionsInForce(stored: readonly AdoptionRecord[], release: readonly Adoption[] = releaseAdoptions()): Adoption[] {
  const key = (a: { provider: string; model: string }) => `${a.provider}\u0000${a.model}`;
  const byKey = new Map(release.map((a) => [key(a), a]));
  for (const r of stored) {
    if (r.prices === '') byKey.delete(key(r));
    else {
      const body = JSON.parse(r.prices) as Pick<Adoption, 'prices' | 'match'>;
      byKey.set(key(r), { provider: r.provider, model: r.model, from: r.validFrom, source: r.source, prices: body.prices, match: body.match });
    }
  }
  return [...byKey.values()];
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
