import {
  bundledCatalog,
  catalogDiff,
  catalogTag,
  datedChanges,
  parseCatalog,
  readCatalogFile,
  type Catalog,
  type CatalogChange,
} from '@trace-ingest/shared/catalog';
import { DAY_MS, floorDay, utcDay } from '@trace-ingest/shared/dates';
import { UsageError } from '@trace-ingest/shared/errors';
import { adoptionFor, auditPrices, bundledSecondCatalog, secondCatalogTag, type AuditFinding } from '@trace-ingest/shared/price-audit';
import type { Adoption } from '@trace-ingest/shared/catalog';
import type { CatalogRecord } from '@trace-ingest/store/control-store-types';
import { createPricing, releaseAdoptions, storeAdoption } from '@trace-ingest/store/pricing';
import { openSpanAccess } from '../span-access.js';
import type { CliContext } from '../context.js';
import { currentActor } from './lifecycle.js';

/** The catalog in force now: the imported one, else PRICE_CATALOG_FILE, else the release's. */
export async function catalogInForce(ctx: CliContext): Promise<{ catalog: Catalog; imported: CatalogRecord | null }> {
  const active = await (await ctx.keys()).activeCatalog();
  if (active !== null) return { catalog: parseCatalog(active.data, active.source, active.date), imported: active };
  return { catalog: ctx.config.PRICE_CATALOG_FILE !== undefined ? readCatalogFile(ctx.config.PRICE_CATALOG_FILE) : bundledCatalog(), imported: null };
}

export interface ImportResult {
  catalog: string;
  replaces: string;
  dryRun: boolean;
  /** False when this very file was imported before (it is put in force again). */
  created: boolean;
  changes: CatalogChange[];
  /** Models whose changed price the file does not date: it holds from the catalog's date, the older price before. */
  dated: string[];
  added: number;
  changed: number;
  removed: number;
}

/**
 * Imports a newer catalog file on a running install (or shows, with
 * `dryRun`, what it would change): validated first, kept with every earlier
 * version, in force from the next request of every replica. A bad file is
 * refused with one line, and the catalog in force stays. A price the file
 * changes without a date holds from the file's date (`dated`): what is kept
 * (and named by its sha256) is the file with the older price before that day.
 */
export async function importCatalog(
  ctx: CliContext,
  input: { file: string; source?: string | undefined; date?: string | undefined; dryRun: boolean; actor?: string },
): Promise<ImportResult> {
  const file = readCatalogFile(input.file, { source: input.source, date: input.date });
  const { catalog: now } = await catalogInForce(ctx);
  // An undated change holds from the file's date: kept so, older spans reprice at the price of their day.
  const { providers, dated, rewritten } = datedChanges(now.providers, file.providers, file.meta.date);
  const next = !rewritten ? file : parseCatalog(JSON.stringify(providers), file.meta.source, file.meta.date);
  const changes = catalogDiff(now.providers, next.providers);
  const count = (k: CatalogChange['kind']) => changes.filter((c) => c.kind === k).length;
  const base = {
    catalog: catalogTag(next.meta),
    replaces: catalogTag(now.meta),
    dryRun: input.dryRun,
    changes,
    dated,
    added: count('added'),
    changed: count('changed'),
    removed: count('removed'),
  };
  if (input.dryRun) return { ...base, created: false };
  const keys = await ctx.keys();
  const { created } = await keys.importCatalog({
    source: next.meta.source,
    date: next.meta.date,
    sha256: next.meta.sha256,
    data: next.text,
    importedBy: input.actor ?? currentActor(),
  });
  return { ...base, created };
}

export interface CatalogListing {
  id: string;
  catalog: string;
  importedAt: string;
  importedBy: string;
  inForce: boolean;
}

/** The release's catalog and every imported one, with the one in force marked. */
export async function listCatalogs(ctx: CliContext): Promise<CatalogListing[]> {
  const keys = await ctx.keys();
  const active = await keys.activeCatalog();
  const release = bundledCatalog();
  return [
    { id: 'release', catalog: catalogTag(release.meta), importedAt: '', importedBy: '', inForce: active === null },
    ...(await keys.listCatalogs()).map((c) => ({
      id: c.id,
      catalog: catalogTag(c),
      importedAt: new Date(c.importedAt).toISOString(),
      importedBy: c.importedBy,
      inForce: active?.id === c.id,
    })),
  ];
}

/** Puts an imported catalog (id or sha256 prefix) in force again, or `release` for the one the release ships. */
export async function useCatalog(ctx: CliContext, which: string): Promise<string> {
  const keys = await ctx.keys();
  if (which === 'release') {
    await keys.useCatalog(null);
    return catalogTag(bundledCatalog().meta);
  }
  const r = await keys.useCatalog(which);
  return r === null ? catalogTag(bundledCatalog().meta) : catalogTag(r);
}

export interface AuditInput {
  /** Only models with stored spans (since `since`, epoch ms, when given). */
  seen?: boolean | undefined;
  since?: number | undefined;
  /** Adopt the second catalog's price for these flagged models (model names or second-catalog keys). */
  adopt?: readonly string[] | undefined;
  /** Adopt every flagged model. */
  all?: boolean | undefined;
  /** Withdraw the adoption of these models (the release's too). */
  unadopt?: readonly string[] | undefined;
  /** YYYY-MM-DD: the day an adopted price holds from (default: the second catalog's snapshot date). */
  from?: string | undefined;
  at?: number | undefined;
}

export interface AuditResult {
  catalog: string;
  second: string;
  at: string;
  findings: AuditFinding[];
  differs: number;
  unknown: number;
  adopted: Adoption[];
  unadopted: string[];
}

/** Models with stored spans, by provider as sent. */
async function seenModels(ctx: CliContext, since: number | undefined): Promise<{ provider: string; model: string }[]> {
  // A date literal both stores compare with a Date column.
  const when = since === undefined ? '' : ` AND start_date >= '${utcDay(since)}'`;
  const rows = await (await openSpanAccess(ctx)).sql(`SELECT DISTINCT provider, model_id FROM models_daily WHERE model_id <> ''${when}`, [], 100_000);
  return rows.map((r) => ({ provider: String(r.provider), model: String(r.model_id) }));
}

/**
 * Lists every model where the second catalog disagrees with the price in
 * force (with every source of each price and its date), and adopts (or
 * withdraws) its price for the models named: an adoption is a price of the
 * catalog from a date on (`from`, else the second catalog's snapshot date),
 * changing only the prices it states, in force on the next request of every
 * replica, shown by `prices show`; spans before its date keep their price.
 */
export async function auditCatalog(ctx: CliContext, input: AuditInput): Promise<AuditResult> {
  const keys = await ctx.keys();
  const second = bundledSecondCatalog();
  const unadopted: string[] = [];
  if ((input.unadopt ?? []).length > 0) {
    // A name as spans send it (claude-sonnet-4-20250514) withdraws the adoption of the catalog model it resolves to.
    const before = await createPricing(keys, { catalogFile: ctx.config.PRICE_CATALOG_FILE });
    const adopted = before.engine.adoptionList;
    for (const name of input.unadopt ?? []) {
      const ids = new Set([name, ...adopted.map((a) => before.engine.resolve('', a.provider, name, Date.now())?.model ?? '')]);
      const hits = adopted.filter((a) => ids.has(a.model));
      if (hits.length === 0) throw new UsageError(`no adopted price for model "${name}" (see: trace-ingest prices show ${name})`);
      for (const a of hits) {
        await keys.removeAdoption(a.model, a.provider);
        if (releaseAdoptions().some((r) => r.provider === a.provider && r.model === a.model)) {
          await keys.setAdoption({ provider: a.provider, model: a.model, validFrom: a.from, source: a.source, prices: '' });
        }
      }
      unadopted.push(name);
    }
  }
  let pricing = await createPricing(keys, { catalogFile: ctx.config.PRICE_CATALOG_FILE });
  const at = input.at ?? noonToday();
  const only = input.seen === true ? await seenModels(ctx, input.since) : undefined;
  let findings = auditPrices(pricing.engine, second, { at, only });
  const adopted: Adoption[] = [];
  const wanted = input.all === true ? findings : findings.filter((f) => (input.adopt ?? []).some((m) => m === f.model || m === f.key));
  for (const name of input.adopt ?? []) {
    if (!findings.some((f) => f.model === name || f.key === name)) throw new UsageError(`"${name}" is not flagged by the audit: nothing to adopt`);
  }
  if (input.from !== undefined && (!/^\d{4}-\d{2}-\d{2}$/.test(input.from) || Number.isNaN(Date.parse(`${input.from}T00:00:00Z`)))) {
    throw new UsageError(`--from: not a calendar date (use YYYY-MM-DD): ${input.from}`);
  }
  for (const f of wanted) {
    const a = adoptionFor(pricing.engine, second, f, input.from);
    await storeAdoption(keys, a);
    adopted.push(a);
  }
  if (adopted.length > 0) {
    pricing = await createPricing(keys, { catalogFile: ctx.config.PRICE_CATALOG_FILE });
    findings = auditPrices(pricing.engine, second, { at, only });
  }
  return {
    catalog: pricing.engine.catalogVersion,
    second: secondCatalogTag(second.meta),
    at: new Date(at).toISOString(),
    findings,
    differs: findings.filter((f) => f.status === 'differs').length,
    unknown: findings.filter((f) => f.status !== 'differs').length,
    adopted,
    unadopted,
  };
}

/** Noon UTC today: a time-of-day discount (DeepSeek's night prices) does not stand for the day's price. */
function noonToday(): number {
  return floorDay(Date.now()) + DAY_MS / 2;
}
