import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import type { ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { ModelInfo, Provider } from '@pydantic/genai-prices';
import { UsageError } from './errors.js';

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
  return parseCatalog(raw, opts.source ?? path.basename(file), opts.date ?? mtime.toISOString().slice(0, 10));
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
 * A price taken from the second catalog for one model (`prices audit
 * --adopt`): added to the model's prices from `from` on, as a price of the
 * catalog itself, so genai-prices picks it by date like any other. Spans it
 * prices say `catalog:<source>` in `price_source`.
 */
export interface Adoption {
  provider: string;
  model: string;
  /** YYYY-MM-DD: the second catalog's snapshot date. */
  from: string;
  /** e.g. `litellm@8442b939a6ea/2026-07-24`. */
  source: string;
  /** For a model the provider does not have yet: the names it matches (genai-prices match logic; default: the model's name). */
  match?: ModelInfo['match'] | undefined;
  /** genai-prices price keys (`input_mtok`, `output_mtok`, ...), numbers or `{ base, tiers }`. */
  prices: Record<string, number | { base: number; tiers: { start: number; price: number }[] }>;
}

/** The providers with the adoptions merged in (copies of what changes; the input is left as is). */
export function withAdoptions(providers: readonly Provider[], adoptions: readonly Adoption[]): Provider[] {
  if (adoptions.length === 0) return [...providers];
  const out = providers.map((p) => ({ ...p, models: [...p.models] }));
  for (const a of adoptions) {
    let p = out.find((x) => x.id === a.provider);
    if (p === undefined) {
      p = { id: a.provider, name: a.provider, api_pattern: `^${a.provider}$`, models: [] };
      out.push(p);
    }
    const i = p.models.findIndex((m) => m.id === a.model);
    const price = { constraint: { start_date: a.from, type: 'start_date' as const }, prices: a.prices as ModelInfo['prices'] & object };
    if (i < 0) {
      // First: a model of its own is more specific than the provider's patterns (an alias such as `-latest` that one of them also matches).
      p.models.unshift({ id: a.model, name: a.model, match: a.match ?? { equals: a.model }, prices: [price as never] } as unknown as ModelInfo);
      continue;
    }
    const m = p.models[i] as ModelInfo;
    const earlier = Array.isArray(m.prices) ? m.prices : [{ prices: m.prices }];
    p.models[i] = { ...m, prices: [...earlier, price as never] } as ModelInfo;
  }
  return out;
}
