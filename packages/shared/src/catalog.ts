import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import type { ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { ModelInfo, Provider } from '@pydantic/genai-prices';
import { utcDay } from './dates.js';
import { UsageError } from './errors.js';

export type { Adoption } from './price-records.js';

/**
 * The price catalog as data: genai-prices' `Provider[]` (the shape of its
 * repository's `prices/new_data/v2/data.json`), validated by that
 * repository's `data.schema.json` before use, and known by its source, date
 * and SHA-256, which every span it prices carries in `price_source`. The
 * product ships one (`catalog/genai-prices.json`); `prices import` brings
 * newer ones. Nothing is ever fetched.
 */

// The same relative path from src/ and from dist/.
export const CATALOG_DIR = fileURLToPath(new URL('../../../catalog/', import.meta.url));

export interface CatalogMeta {
  /** Where the data comes from, e.g. `genai-prices@0.1.8` or the imported file's name. */
  source: string;
  /** The day the data describes (YYYY-MM-DD). */
  date: string;
  /** Of the file's bytes. */
  sha256: string;
}

export interface Catalog {
  providers: Provider[];
  meta: CatalogMeta;
  /** The file's text, as its sha256 was taken (what an import stores). */
  text: string;
}

/** A catalog's name in `price_source` and listings: `genai-prices@0.1.8/2026-09-23#3fa2c1d0e9ab`. */
export function catalogTag(m: CatalogMeta): string {
  return `${m.source}/${m.date}#${m.sha256.slice(0, 12)}`;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
let validator: ValidateFunction | undefined;

function validate(): ValidateFunction {
  if (validator === undefined) {
    const ajv = new Ajv({ strict: false, allErrors: false });
    addFormats(ajv);
    validator = ajv.compile(JSON.parse(fs.readFileSync(path.join(CATALOG_DIR, 'genai-prices.schema.json'), 'utf8')) as object);
  }
  return validator;
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * A catalog file's bytes, checked: JSON, genai-prices' schema, a date.
 * Throws a UsageError of one line that says what is wrong.
 */
export function parseCatalog(raw: string | Buffer, source: string, date: string): Catalog {
  if (!DAY.test(date) || Number.isNaN(Date.parse(`${date}T00:00:00Z`))) throw new UsageError(`catalog date must be YYYY-MM-DD (got ${JSON.stringify(date)})`);
  if (source.trim() === '' || source.length > 100) throw new UsageError('catalog source must be 1 to 100 characters');
  const text = typeof raw === 'string' ? raw : raw.toString('utf8');
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`the catalog file is not JSON: ${(e as Error).message}`);
  }
  const v = validate();
  if (!v(data)) {
    const first = v.errors?.[0];
    const where = first?.instancePath === '' ? 'the document' : first?.instancePath;
    throw new UsageError(`the catalog file is not a genai-prices data file (data.schema.json): ${where} ${first?.message ?? ''}`.trim());
  }
  const providers = data as Provider[];
  if (providers.length === 0) throw new UsageError('the catalog file holds no providers');
  return { providers, meta: { source: source.trim(), date, sha256: createHash('sha256').update(text).digest('hex') }, text };
}

let bundled: Catalog | undefined;

/** The catalog this release ships (catalog/genai-prices.json with its meta file). */
export function bundledCatalog(): Catalog {
  if (bundled === undefined) {
    const meta = JSON.parse(fs.readFileSync(path.join(CATALOG_DIR, 'genai-prices.meta.json'), 'utf8')) as { source: string; date: string };
    bundled = parseCatalog(fs.readFileSync(path.join(CATALOG_DIR, 'genai-prices.json')), meta.source, meta.date);
  }
  return bundled;
}

/** A catalog file given by path (PRICE_CATALOG_FILE, `prices import`): its name is its source unless told. */
export function readCatalogFile(file: string, opts: { source?: string | undefined; date?: string | undefined } = {}): Catalog {
  let raw: Buffer;
  let mtime: Date;
  try {
    raw = fs.readFileSync(file);
    mtime = fs.statSync(file).mtime;
  } catch (e) {
    throw new UsageError(`the catalog file ${file} cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  return parseCatalog(raw, opts.source ?? path.basename(file), opts.date ?? utcDay(mtime.getTime()));
}

/** One model's change between two catalogs. */
export interface CatalogChange {
  kind: 'added' | 'removed' | 'changed';
  provider: string;
  model: string;
  /** The model's prices as each catalog has them (JSON), for people. */
  before?: string | undefined;
  after?: string | undefined;
  /** Start dates of prices that the newer catalog has and the older does not. */
  from: string[];
}

function startDates(m: ModelInfo | undefined): string[] {
  if (m === undefined || !Array.isArray(m.prices)) return [];
  return m.prices.flatMap((p) => (p.constraint !== undefined && 'start_date' in p.constraint ? [p.constraint.start_date] : []));
}

/** What changes from `before` to `after`: models added, removed, and whose prices (or their dates) differ. */
export function catalogDiff(before: readonly Provider[], after: readonly Provider[]): CatalogChange[] {
  const index = (ps: readonly Provider[]) =>
    new Map(ps.flatMap((p) => p.models.map((m): [string, [string, ModelInfo]] => [`${p.id}\u0000${m.id}`, [p.id, m]])));
  const a = index(before);
  const b = index(after);
  const out: CatalogChange[] = [];
  for (const [k, [provider, m]] of b) {
    const old = a.get(k)?.[1];
    if (old === undefined) out.push({ kind: 'added', provider, model: m.id, after: JSON.stringify(m.prices), from: startDates(m) });
    else if (JSON.stringify(old.prices) !== JSON.stringify(m.prices)) {
      const seen = new Set(startDates(old));
      out.push({
        kind: 'changed',
        provider,
        model: m.id,
        before: JSON.stringify(old.prices),
        after: JSON.stringify(m.prices),
        from: startDates(m).filter((d) => !seen.has(d)),
      });
    }
  }
  for (const [k, [provider, m]] of a) if (!b.has(k)) out.push({ kind: 'removed', provider, model: m.id, before: JSON.stringify(m.prices), from: [] });
  return out.sort((x, y) => x.provider.localeCompare(y.provider) || x.model.localeCompare(y.model));
}

/**
 * A newer catalog whose prices keep their dates: a model price it changes
 * without dating the change (no start date the older catalog lacks) holds from
 * `date`, the day the newer catalog describes, and the older catalog's prices
 * stay before it, so a reprice of older spans keeps the price of their day.
 * Models it adds price every day (they had none before); a model with prices
 * by time of day is taken as it is; a model already dated so (the same file
 * imported again) stays as it was. Returns the providers, the models dated,
 * and whether the providers differ from `after` at all.
 */
export function datedChanges(
  before: readonly Provider[],
  after: readonly Provider[],
  date: string,
): { providers: Provider[]; dated: string[]; rewritten: boolean } {
  const old = new Map(before.flatMap((p) => p.models.map((m): [string, ModelInfo] => [`${p.id}\u0000${m.id}`, m])));
  const dated: string[] = [];
  let rewritten = false;
  const providers = after.map((p) => ({
    ...p,
    models: p.models.map((m) => {
      const prior = old.get(`${p.id}\u0000${m.id}`);
      if (prior === undefined || JSON.stringify(prior.prices) === JSON.stringify(m.prices) || hasTimeOfDay(m) || hasTimeOfDay(prior)) return m;
      const seen = new Set(startDates(prior));
      if (startDates(m).some((d) => !seen.has(d))) return m;
      const newest = inForceOn(m, date);
      if (startDates(prior).some((d) => d >= date)) {
        // Dated on this day or later already: kept when it is this very change.
        if (JSON.stringify(inForceOn(prior, date)) !== JSON.stringify(newest)) return m;
        rewritten = true;
        return prior;
      }
      dated.push(`${p.id}/${m.id}`);
      rewritten = true;
      const earlier = Array.isArray(prior.prices) ? prior.prices : [{ prices: prior.prices }];
      const later = Array.isArray(m.prices)
        ? m.prices.filter((e) => e.constraint !== undefined && 'start_date' in e.constraint && e.constraint.start_date > date)
        : [];
      // The last entry that applies wins: the older prices, then the newer one from `date`, then any later.
      return { ...m, prices: [...earlier, { constraint: { start_date: date }, prices: newest }, ...later] } as ModelInfo;
    }),
  }));
  return { providers, dated, rewritten };
}

/** The prices of a model in force on a day (the last entry that applies). */
function inForceOn(m: ModelInfo, date: string): unknown {
  if (!Array.isArray(m.prices)) return m.prices;
  let found: unknown;
  for (const e of m.prices) if (e.constraint === undefined || ('start_date' in e.constraint && e.constraint.start_date <= date)) found = e.prices;
  return found;
}

function hasTimeOfDay(m: ModelInfo): boolean {
  return Array.isArray(m.prices) && m.prices.some((e) => e.constraint !== undefined && 'start_time' in e.constraint);
}
