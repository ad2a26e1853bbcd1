import { fileURLToPath } from 'node:url';
import { and, asc, eq, sql, type SQL } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { ConfigError, ConflictError, ServiceUnavailableError, UsageError, isTiError } from '@trace-ingest/shared/errors';
import { generateApiKey, hashApiKey, isWellFormedKey, keyPrefix, newId } from '@trace-ingest/shared/ids';
import * as schema from './schema/postgres.js';
import { apiKeys, orgs, plans, priceOverrides, settings } from './schema/postgres.js';
import type { ApiKeyInfo, CreatedKey, KeyStore, Org, Plan, PriceOverrideInput, PriceOverrideRecord, ResolvedKey } from './key-store.js';
import { DEFAULT_PLAN, validatePlanNumbers } from './key-store.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/postgres', import.meta.url));
const MIGRATIONS_TABLE = '__drizzle_migrations';
const PRICE_VERSION_KEY = 'price_overrides_version';
/** Lower case only: the name is used both quoted (DDL) and unquoted (search_path), which fold differently. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

type Db = NodePgDatabase<typeof schema>;

export interface PostgresKeyStoreOptions {
  /** Connections per process; every request needs one for each key-store round trip. */
  poolSize?: number;
  /** Wins over `?schema=` in the URL; default `public`. */
  schema?: string;
}

/**
 * The key store shared by every replica (DATABASE_URL=postgres://...).
 *
 * Schema: all tables, and drizzle's migration journal, live in one PostgreSQL
 * schema picked by `opts.schema` or else by `?schema=<name>` in the URL
 * (default `public`), so tests and several deployments can share a database.
 * The parameter is removed from the URL before pg sees it and becomes
 * `-c search_path=<name>` on every pooled connection.
 *
 * Nothing is cached in the process: a revoked key, a plan change or a price
 * override written by one replica or the CLI is read by every replica on its
 * next request.
 *
 * When PostgreSQL cannot be reached, calls fail within the connect timeout
 * with ServiceUnavailableError (503 + Retry-After) rather than a 500, because
 * retrying the same request later is the right thing for a client to do.
 */
export class PostgresKeyStore implements KeyStore {
  readonly kind = 'postgres';
  readonly schema: string;
  private readonly poolConfig: pg.PoolConfig;
  private pool: pg.Pool | undefined;
  private db: Db | undefined;
  private readonly usageBatches = new Map<string, UsageBatch>();
  private starting: Promise<void> | undefined;

  constructor(url: string, opts: PostgresKeyStoreOptions = {}) {
    const parsed = parseDatabaseUrl(url);
    this.schema = opts.schema ?? parsed.schema ?? 'public';
    if (!SCHEMA_NAME.test(this.schema)) {
      throw new ConfigError(`DATABASE_URL schema "${this.schema}" must match ${String(SCHEMA_NAME)} (lower-case letters, digits, _)`);
    }
    this.poolConfig = {
      connectionString: parsed.url,
      max: opts.poolSize ?? 10,
      // A dead database must surface as a 503 quickly, not as a hung request.
      connectionTimeoutMillis: 3000,
      idleTimeoutMillis: 30_000,
      application_name: 'trace-ingest',
      options: [parsed.options, `-c search_path=${this.schema}`].filter((o) => o !== '').join(' '),
    };
  }

  async start(): Promise<void> {
    if (this.pool !== undefined) return;
    // Callers that start the same instance at once share one pool.
    this.starting ??= this.open().finally(() => {
      this.starting = undefined;
    });
    await this.starting;
  }

  private async open(): Promise<void> {
    const pool = new pg.Pool(this.poolConfig);
    // An idle connection dropped by a database restart is discarded by the pool;
    // without a listener the 'error' event would end the process.
    pool.on('error', () => undefined);
    try {
      await guard(() => this.migrate(pool));
    } catch (e) {
      await pool.end();
      throw e;
    }
    this.pool = pool;
    this.db = drizzle(pool, { schema });
  }

  /**
   * Replicas may start together: a session advisory lock (per schema) makes
   * one of them migrate while the others wait, then find nothing left to do.
   */
  private async migrate(pool: pg.Pool): Promise<void> {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      const lockName = `trace-ingest:migrate:${this.schema}`;
      await client.query('SELECT pg_advisory_lock(hashtext($1))', [lockName]);
      try {
        await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(this.schema)}`);
        const db = drizzle(client, { schema });
        await migrate(db, { migrationsFolder: MIGRATIONS_DIR, migrationsSchema: this.schema, migrationsTable: MIGRATIONS_TABLE });
        await db
          .insert(plans)
          .values({ id: 'plan_default', name: DEFAULT_PLAN.name, monthlySpans: DEFAULT_PLAN.monthlySpans, rateLimitRps: DEFAULT_PLAN.rateLimitRps, createdAt: Date.now() })
          .onConflictDoNothing();
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1))', [lockName]);
      }
    } catch (e) {
      broken = e instanceof Error ? e : new Error(String(e));
      throw e;
    } finally {
      // A connection that failed mid-migration may still hold the lock: destroy it.
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    this.db = undefined;
    await pool?.end();
  }

  async ping(): Promise<void> {
    await this.query('SELECT 1', []);
  }

  private orm(): Db {
    if (this.db === undefined) throw new Error('key store is not started');
    return this.db;
  }

  /** Raw statements for the hot path: one round trip, prepared once per connection by name. */
  private async query<R extends pg.QueryResultRow>(text: string, values: unknown[], name?: string): Promise<R[]> {
    const pool = this.pool;
    if (pool === undefined) throw new Error('key store is not started');
    const res = await guard(() => pool.query<R>(name === undefined ? { text, values } : { name, text, values }));
    return res.rows;
  }

  async resolveKeyHash(sha256Hex: string): Promise<ResolvedKey | null> {
    const rows = await this.query<ResolvedRow>(
      `SELECT k.id AS "keyId", k.prefix AS prefix, o.id AS "orgId", o.name AS "orgName", p.name AS "planName",
              p.monthly_spans AS "monthlySpans", p.rate_limit_rps AS "rateLimitRps"
         FROM api_keys k JOIN orgs o ON o.id = k.org_id JOIN plans p ON p.id = o.plan_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
      [sha256Hex],
      'ti_resolve_key',
    );
    const r = rows[0];
    if (r === undefined) return null;
    // pg returns bigint as text; every value here is a safe integer (validatePlanNumbers).
    return { ...r, monthlySpans: Number(r.monthlySpans), rateLimitRps: Number(r.rateLimitRps) };
  }

  async createPlan(input: { name: string; monthlySpans: number; rateLimitRps: number }): Promise<Plan> {
    validatePlanNumbers(input);
    const db = this.orm();
    const conflict = (): ConflictError => new ConflictError(`plan "${input.name}" already exists; use "plans update" to change it`);
    if ((await guard(() => db.select({ id: plans.id }).from(plans).where(eq(plans.name, input.name)))).length > 0) throw conflict();
    const row = { id: newId('plan'), name: input.name, monthlySpans: input.monthlySpans, rateLimitRps: input.rateLimitRps, createdAt: Date.now() };
    await guard(() => db.insert(plans).values(row), conflict);
    return row;
  }

  async updatePlan(name: string, patch: { monthlySpans?: number; rateLimitRps?: number }): Promise<Plan> {
    validatePlanNumbers(patch);
    const db = this.orm();
    const set: Partial<Pick<Plan, 'monthlySpans' | 'rateLimitRps'>> = {};
    if (patch.monthlySpans !== undefined) set.monthlySpans = patch.monthlySpans;
    if (patch.rateLimitRps !== undefined) set.rateLimitRps = patch.rateLimitRps;
    // One statement, so two concurrent patches of different fields both stick.
    const [row] =
      Object.keys(set).length === 0
        ? await guard(() => db.select().from(plans).where(eq(plans.name, name)))
        : await guard(() => db.update(plans).set(set).where(eq(plans.name, name)).returning());
    if (row === undefined) throw new UsageError(`unknown plan "${name}"; see "trace-ingest plans list"`);
    return row;
  }

  async listPlans(): Promise<Plan[]> {
    const db = this.orm();
    return guard(() => db.select().from(plans).orderBy(asc(plans.name)));
  }

  private async planByName(name: string): Promise<Plan> {
    const db = this.orm();
    const [p] = await guard(() => db.select().from(plans).where(eq(plans.name, name)));
    if (p === undefined) throw new UsageError(`unknown plan "${name}"; see "trace-ingest plans list"`);
    return p;
  }

  private async orgRows(where?: SQL): Promise<Org[]> {
    const q = this.orm()
      .select({ id: orgs.id, name: orgs.name, planId: orgs.planId, planName: plans.name, createdAt: orgs.createdAt })
      .from(orgs)
      .innerJoin(plans, eq(plans.id, orgs.planId));
    return guard(() => (where === undefined ? q : q.where(where)).orderBy(asc(orgs.name)));
  }

  async createOrg(input: { name: string; planName?: string }): Promise<Org> {
    const plan = await this.planByName(input.planName ?? DEFAULT_PLAN.name);
    const db = this.orm();
    const conflict = (): ConflictError => new ConflictError(`org "${input.name}" already exists`);
    if ((await guard(() => db.select({ id: orgs.id }).from(orgs).where(eq(orgs.name, input.name)))).length > 0) throw conflict();
    const row = { id: newId('org'), name: input.name, planId: plan.id, createdAt: Date.now() };
    await guard(() => db.insert(orgs).values(row), conflict);
    return { ...row, planName: plan.name };
  }

  async setOrgPlan(orgName: string, planName: string): Promise<Org> {
    const org = await this.requireOrg(orgName);
    const plan = await this.planByName(planName);
    const db = this.orm();
    await guard(() => db.update(orgs).set({ planId: plan.id }).where(eq(orgs.id, org.id)));
    return { ...org, planId: plan.id, planName: plan.name };
  }

  async listOrgs(): Promise<Org[]> {
    return this.orgRows();
  }

  async getOrg(nameOrId: string): Promise<Org | null> {
    return this.findOrg(nameOrId);
  }

  private async findOrg(nameOrId: string): Promise<Org | null> {
    return (await this.orgRows(eq(orgs.name, nameOrId)))[0] ?? (await this.orgRows(eq(orgs.id, nameOrId)))[0] ?? null;
  }

  private async requireOrg(nameOrId: string): Promise<Org> {
    const org = await this.findOrg(nameOrId);
    if (org === null) throw new UsageError(`unknown org "${nameOrId}"; see "trace-ingest orgs list"`);
    return org;
  }

  async createKey(input: { orgName: string; name?: string; key?: string }): Promise<CreatedKey> {
    const org = await this.requireOrg(input.orgName);
    const key = input.key ?? generateApiKey();
    if (!isWellFormedKey(key)) throw new UsageError('an API key must start with "ti_" followed by at least 20 characters of [A-Za-z0-9_-]');
    const keyHash = hashApiKey(key);
    const conflict = (): ConflictError => new ConflictError('this API key already exists');
    if (await this.hasKeyHash(keyHash)) throw conflict();
    const row = { id: newId('key'), orgId: org.id, name: input.name ?? '', prefix: keyPrefix(key), keyHash, createdAt: Date.now(), revokedAt: null };
    const db = this.orm();
    await guard(() => db.insert(apiKeys).values(row), conflict);
    return { id: row.id, orgId: org.id, orgName: org.name, name: row.name, prefix: row.prefix, createdAt: row.createdAt, revokedAt: null, key };
  }

  async hasKeyHash(sha256Hex: string): Promise<boolean> {
    const rows = await this.query('SELECT 1 FROM api_keys WHERE key_hash = $1', [sha256Hex], 'ti_has_key');
    return rows.length > 0;
  }

  private async keyRows(where?: SQL): Promise<ApiKeyInfo[]> {
    const q = this.orm()
      .select({
        id: apiKeys.id,
        orgId: apiKeys.orgId,
        orgName: orgs.name,
        name: apiKeys.name,
        prefix: apiKeys.prefix,
        createdAt: apiKeys.createdAt,
        revokedAt: apiKeys.revokedAt,
      })
      .from(apiKeys)
      .innerJoin(orgs, eq(orgs.id, apiKeys.orgId));
    return guard(() => (where === undefined ? q : q.where(where)).orderBy(asc(apiKeys.createdAt)));
  }

  async listKeys(filter?: { orgName?: string }): Promise<ApiKeyInfo[]> {
    if (filter?.orgName === undefined) return this.keyRows();
    const org = await this.requireOrg(filter.orgName);
    return this.keyRows(eq(apiKeys.orgId, org.id));
  }

  async revokeKey(prefixOrId: string): Promise<ApiKeyInfo> {
    const matches = [...(await this.keyRows(eq(apiKeys.id, prefixOrId))), ...(await this.keyRows(eq(apiKeys.prefix, prefixOrId)))];
    const unique = [...new Map(matches.map((k) => [k.id, k])).values()];
    const [only] = unique;
    if (only === undefined) throw new UsageError(`no API key with id or prefix "${prefixOrId}"; see "trace-ingest keys list"`);
    if (unique.length > 1) throw new UsageError(`prefix "${prefixOrId}" matches ${unique.length} keys; revoke by id instead`);
    if (only.revokedAt !== null) return only;
    const db = this.orm();
    // When another replica revoked it meanwhile, its instant is the one that stands.
    const [row] = await guard(() =>
      db
        .update(apiKeys)
        .set({ revokedAt: Date.now() })
        .where(and(eq(apiKeys.id, only.id), sql`${apiKeys.revokedAt} IS NULL`))
        .returning({ revokedAt: apiKeys.revokedAt }),
    );
    if (row !== undefined) return { ...only, revokedAt: row.revokedAt };
    const [again] = await this.keyRows(eq(apiKeys.id, only.id));
    return again ?? only;
  }

  async getMonthUsage(orgId: string, month: string): Promise<number> {
    const rows = await this.query<{ spans: string }>('SELECT spans FROM usage_months WHERE org_id = $1 AND month = $2', [orgId, month], 'ti_get_usage');
    return Number(rows[0]?.spans ?? 0);
  }

  /**
   * Every request of an org updates the same row, and each update holds that
   * row's lock until its commit is flushed, so updates of one org run one
   * after another: a few hundred a second. While one is in flight, the adds
   * that arrive for the same org and month wait and then go as one upsert;
   * each caller gets the total after its spans were added.
   */
  async addMonthUsage(orgId: string, month: string, n: number): Promise<number> {
    // One bad number would fail every add it shares an upsert with.
    if (!Number.isSafeInteger(n) || n < 0) throw new UsageError(`usage to add must be an integer >= 0 (got ${n})`);
    const key = `${orgId}\u0000${month}`;
    let batch = this.usageBatches.get(key);
    if (batch === undefined) {
      batch = { spans: 0, waiters: [], running: false };
      this.usageBatches.set(key, batch);
    }
    const total = new Promise<number>((resolve, reject) => batch.waiters.push({ resolve, reject }));
    batch.spans += n;
    if (!batch.running) void this.flushUsage(key, batch, orgId, month);
    return total;
  }

  private async flushUsage(key: string, batch: UsageBatch, orgId: string, month: string): Promise<void> {
    batch.running = true;
    while (batch.waiters.length > 0) {
      const waiters = batch.waiters.splice(0);
      const spans = batch.spans;
      batch.spans = 0;
      try {
        const rows = await this.query<{ spans: string }>(
          `INSERT INTO usage_months AS u (org_id, month, spans) VALUES ($1, $2, $3)
           ON CONFLICT (org_id, month) DO UPDATE SET spans = u.spans + excluded.spans RETURNING spans`,
          [orgId, month, spans],
          'ti_add_usage',
        );
        const total = Number(rows[0]?.spans ?? 0);
        for (const w of waiters) w.resolve(total);
      } catch (e) {
        for (const w of waiters) w.reject(e);
      }
    }
    this.usageBatches.delete(key);
  }

  async listPriceOverrides(): Promise<PriceOverrideRecord[]> {
    const db = this.orm();
    return guard(() =>
      db
        .select()
        .from(priceOverrides)
        .orderBy(asc(priceOverrides.model), asc(priceOverrides.orgId), asc(priceOverrides.provider), asc(priceOverrides.validFrom)),
    );
  }

  async setPriceOverride(input: PriceOverrideInput): Promise<PriceOverrideRecord> {
    const db = this.orm();
    const row: PriceOverrideRecord = { id: newId('price'), createdAt: Date.now(), ...input };
    // An upsert rather than delete + insert: two writers of the same override cannot collide on the unique index.
    const { orgId: _o, provider: _p, model: _m, validFrom: _v, ...replace } = row;
    await guard(() =>
      db.transaction(async (tx) => {
        await tx
          .insert(priceOverrides)
          .values(row)
          .onConflictDoUpdate({ target: [priceOverrides.orgId, priceOverrides.provider, priceOverrides.model, priceOverrides.validFrom], set: replace });
        await bumpVersion(tx);
      }),
    );
    return row;
  }

  async unsetPriceOverride(match: { orgId: string; provider: string; model: string; validFrom?: number }): Promise<number> {
    const db = this.orm();
    const conds = [eq(priceOverrides.orgId, match.orgId), eq(priceOverrides.provider, match.provider), eq(priceOverrides.model, match.model)];
    if (match.validFrom !== undefined) conds.push(eq(priceOverrides.validFrom, match.validFrom));
    return guard(() =>
      db.transaction(async (tx) => {
        const deleted = await tx.delete(priceOverrides).where(and(...conds)).returning({ id: priceOverrides.id });
        if (deleted.length > 0) await bumpVersion(tx);
        return deleted.length;
      }),
    );
  }

  async priceOverridesVersion(): Promise<string> {
    const rows = await this.query<{ value: string }>('SELECT value FROM settings WHERE key = $1', [PRICE_VERSION_KEY], 'ti_price_version');
    return rows[0]?.value ?? '0';
  }
}

interface UsageBatch {
  /** Spans of the waiting adds, not yet sent. */
  spans: number;
  waiters: { resolve: (total: number) => void; reject: (e: unknown) => void }[];
  running: boolean;
}

interface ResolvedRow extends Omit<ResolvedKey, 'monthlySpans' | 'rateLimitRps'> {
  monthlySpans: string;
  rateLimitRps: string;
}

async function bumpVersion(tx: Pick<Db, 'insert'>): Promise<void> {
  await tx
    .insert(settings)
    .values({ key: PRICE_VERSION_KEY, value: '1' })
    .onConflictDoUpdate({ target: settings.key, set: { value: sql`(CAST(${settings.value} AS bigint) + 1)::text` } });
}

/**
 * Splits DATABASE_URL into what pg understands and the schema to use.
 * `options` is taken out and merged back because pg lets a URL's value
 * override the pool config, which would drop the search_path.
 */
export function parseDatabaseUrl(url: string): { url: string; schema: string | undefined; options: string } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { url, schema: undefined, options: '' };
  }
  const schemaParam = u.searchParams.get('schema');
  const options = u.searchParams.get('options') ?? '';
  u.searchParams.delete('schema');
  u.searchParams.delete('options');
  return { url: u.toString(), schema: schemaParam === null || schemaParam === '' ? undefined : schemaParam, options };
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** SQLSTATE classes and socket errors that mean "the database is not there right now". */
const UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '53300', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE']);

function pgCode(e: unknown): string | undefined {
  for (let cur: unknown = e, depth = 0; cur instanceof Error && depth < 4; cur = cur.cause, depth++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

function isUnavailable(e: unknown): boolean {
  const code = pgCode(e);
  if (code !== undefined && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true;
  for (let cur: unknown = e, depth = 0; cur instanceof Error && depth < 4; cur = cur.cause, depth++) {
    if (/timeout exceeded when trying to connect|Connection terminated/i.test(cur.message)) return true;
  }
  return false;
}

/** Maps driver failures to the service's errors: unique violations to the caller's ConflictError, outages to 503. */
async function guard<T>(run: () => Promise<T>, onUniqueViolation?: () => Error): Promise<T> {
  try {
    return await run();
  } catch (e) {
    if (isTiError(e)) throw e;
    if (onUniqueViolation !== undefined && pgCode(e) === '23505') throw onUniqueViolation();
    if (isUnavailable(e)) throw new ServiceUnavailableError('key store (PostgreSQL) is unreachable; retry shortly', 2, e);
    throw e;
  }
}
