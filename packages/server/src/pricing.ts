import { PriceEngine, type PriceOverride } from '@trace-ingest/shared/price-engine';
import type { KeyStore, PriceOverrideRecord } from '@trace-ingest/store/key-store';
import type { Pricing } from './ingest.js';

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

/**
 * The catalog plus the key store's overrides. Before each batch the
 * overrides' version is compared (one indexed read), so a change made with
 * the CLI applies to the next request without a restart.
 */
export async function createPricing(keys: KeyStore, opts: { catalogFile?: string | undefined }): Promise<Pricing & { engine: PriceEngine }> {
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
