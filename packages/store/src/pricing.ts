import { PriceEngine, type PriceOverride } from '@trace-ingest/shared/price-engine';
import type { SpanPricer } from '@trace-ingest/shared/rows';
import type { ControlStore, PriceOverrideRecord } from './control-store-types.js';

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
  /** Reloads the overrides when their version changed since the last load. */
  refresh(): Promise<void>;
  readonly price: SpanPricer;
}

/**
 * The one way to build the price engine: the catalog plus the key store's
 * overrides, for the server and for the CLI alike. The server calls refresh()
 * before each batch, which compares the overrides' version (one indexed
 * read), so a change made with the CLI applies to the next request without a
 * restart.
 */
export async function createPricing(
  keys: Pick<ControlStore, 'priceOverridesVersion' | 'listPriceOverrides'>,
  opts: { catalogFile?: string | undefined },
): Promise<Pricing> {
  const engine = await PriceEngine.create({ catalogFile: opts.catalogFile });
  let version = '';
  const refresh = async (): Promise<void> => {
    const v = await keys.priceOverridesVersion();
    if (v === version) return;
    engine.setOverrides((await keys.listPriceOverrides()).map(toOverride));
    version = v;
  };
  await refresh();
  return { engine, refresh, price: (span, orgId) => engine.price(span, orgId) };
}
