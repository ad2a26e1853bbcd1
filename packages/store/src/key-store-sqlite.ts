import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { and, asc, eq, sql } from 'drizzle-orm';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { ConflictError, UsageError } from '@trace-ingest/shared/errors';
import { generateApiKey, hashApiKey, isWellFormedKey, keyPrefix, newId } from '@trace-ingest/shared/ids';
import * as schema from './schema/sqlite.js';
import { apiKeys, orgs, plans, priceOverrides, settings } from './schema/sqlite.js';
import type { ApiKeyInfo, CreatedKey, KeyStore, Org, Plan, PriceOverrideInput, PriceOverrideRecord, ResolvedKey } from './key-store.js';
import { DEFAULT_PLAN, validatePlanNumbers } from './key-store.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/sqlite', import.meta.url));

type Db = BetterSQLite3Database<typeof schema>;

/**
 * The embedded key store: one SQLite file under DATA_DIR, shared by the
 * server and the CLI (WAL mode lets both open it at once).
 */
export class SqliteKeyStore implements KeyStore {
  readonly kind = 'sqlite';
  private sqlite: Database.Database | undefined;
  private db: Db | undefined;
  private resolveStmt: Database.Statement | undefined;
  private usageStmt: Database.Statement | undefined;
  private addUsageStmt: Database.Statement | undefined;
  private versionStmt: Database.Statement | undefined;

  constructor(private readonly file: string) {}

  async start(): Promise<void> {
    if (this.sqlite !== undefined) return;
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    const sqlite = new Database(this.file);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('foreign_keys = ON');
    const db = drizzle(sqlite, { schema });
    migrate(db, { migrationsFolder: MIGRATIONS_DIR });
    db.insert(plans)
      .values({ id: 'plan_default', name: DEFAULT_PLAN.name, monthlySpans: DEFAULT_PLAN.monthlySpans, rateLimitRps: DEFAULT_PLAN.rateLimitRps, createdAt: Date.now() })
      .onConflictDoNothing()
      .run();
    // The hot path uses hand-prepared statements: one round trip, no builder cost per request.
    this.resolveStmt = sqlite.prepare(
      `SELECT k.id AS keyId, k.prefix AS prefix, o.id AS orgId, o.name AS orgName, p.name AS planName,
              p.monthly_spans AS monthlySpans, p.rate_limit_rps AS rateLimitRps
         FROM api_keys k JOIN orgs o ON o.id = k.org_id JOIN plans p ON p.id = o.plan_id
        WHERE k.key_hash = ? AND k.revoked_at IS NULL`,
    );
    this.usageStmt = sqlite.prepare('SELECT spans FROM usage_months WHERE org_id = ? AND month = ?').pluck();
    this.addUsageStmt = sqlite
      .prepare(
        `INSERT INTO usage_months (org_id, month, spans) VALUES (?, ?, ?)
         ON CONFLICT (org_id, month) DO UPDATE SET spans = spans + excluded.spans RETURNING spans`,
      )
      .pluck();
    this.versionStmt = sqlite.prepare('SELECT value FROM settings WHERE key = ?').pluck();
    this.sqlite = sqlite;
    this.db = db;
    return Promise.resolve();
  }

  async close(): Promise<void> {
    const s = this.sqlite;
    this.sqlite = undefined;
    this.db = undefined;
    s?.close();
    return Promise.resolve();
  }

  async ping(): Promise<void> {
    this.raw().prepare('SELECT 1').get();
    return Promise.resolve();
  }

  private raw(): Database.Database {
    if (this.sqlite === undefined) throw new Error('key store is not started');
    return this.sqlite;
  }

  private orm(): Db {
    if (this.db === undefined) throw new Error('key store is not started');
    return this.db;
  }

  async resolveKeyHash(sha256Hex: string): Promise<ResolvedKey | null> {
    this.raw();
    const row = this.resolveStmt?.get(sha256Hex) as ResolvedKey | undefined;
    return Promise.resolve(row ?? null);
  }

  async createPlan(input: { name: string; monthlySpans: number; rateLimitRps: number }): Promise<Plan> {
    validatePlanNumbers(input);
    const db = this.orm();
    if (db.select().from(plans).where(eq(plans.name, input.name)).get() !== undefined) {
      throw new ConflictError(`plan "${input.name}" already exists; use "plans update" to change it`);
    }
    const row = { id: newId('plan'), name: input.name, monthlySpans: input.monthlySpans, rateLimitRps: input.rateLimitRps, createdAt: Date.now() };
    db.insert(plans).values(row).run();
    return Promise.resolve(row);
  }

  async updatePlan(name: string, patch: { monthlySpans?: number; rateLimitRps?: number }): Promise<Plan> {
    validatePlanNumbers(patch);
    const db = this.orm();
    const current = db.select().from(plans).where(eq(plans.name, name)).get();
    if (current === undefined) throw new UsageError(`unknown plan "${name}"; see "trace-ingest plans list"`);
    const next = { ...current, ...definedOnly(patch) };
    db.update(plans).set({ monthlySpans: next.monthlySpans, rateLimitRps: next.rateLimitRps }).where(eq(plans.id, current.id)).run();
    return Promise.resolve(next);
  }

  async listPlans(): Promise<Plan[]> {
    return Promise.resolve(this.orm().select().from(plans).orderBy(asc(plans.name)).all());
  }

  private planByName(name: string): Plan {
    const p = this.orm().select().from(plans).where(eq(plans.name, name)).get();
    if (p === undefined) throw new UsageError(`unknown plan "${name}"; see "trace-ingest plans list"`);
    return p;
  }

  private orgRows(where?: ReturnType<typeof eq>): Org[] {
    const q = this.orm()
      .select({ id: orgs.id, name: orgs.name, planId: orgs.planId, planName: plans.name, createdAt: orgs.createdAt })
      .from(orgs)
      .innerJoin(plans, eq(plans.id, orgs.planId));
    return (where === undefined ? q : q.where(where)).orderBy(asc(orgs.name)).all();
  }

  async createOrg(input: { name: string; planName?: string }): Promise<Org> {
    const plan = this.planByName(input.planName ?? DEFAULT_PLAN.name);
    const db = this.orm();
    if (db.select().from(orgs).where(eq(orgs.name, input.name)).get() !== undefined) {
      throw new ConflictError(`org "${input.name}" already exists`);
    }
    const row = { id: newId('org'), name: input.name, planId: plan.id, createdAt: Date.now() };
    db.insert(orgs).values(row).run();
    return Promise.resolve({ ...row, planName: plan.name });
  }

  async setOrgPlan(orgName: string, planName: string): Promise<Org> {
    const org = this.requireOrg(orgName);
    const plan = this.planByName(planName);
    this.orm().update(orgs).set({ planId: plan.id }).where(eq(orgs.id, org.id)).run();
    return Promise.resolve({ ...org, planId: plan.id, planName: plan.name });
  }

  async listOrgs(): Promise<Org[]> {
    return Promise.resolve(this.orgRows());
  }

  async getOrg(nameOrId: string): Promise<Org | null> {
    return Promise.resolve(this.findOrg(nameOrId));
  }

  private findOrg(nameOrId: string): Org | null {
    return this.orgRows(eq(orgs.name, nameOrId))[0] ?? this.orgRows(eq(orgs.id, nameOrId))[0] ?? null;
  }

  private requireOrg(nameOrId: string): Org {
    const org = this.findOrg(nameOrId);
    if (org === null) throw new UsageError(`unknown org "${nameOrId}"; see "trace-ingest orgs list"`);
    return org;
  }

  async createKey(input: { orgName: string; name?: string; key?: string }): Promise<CreatedKey> {
    const org = this.requireOrg(input.orgName);
    const key = input.key ?? generateApiKey();
    if (!isWellFormedKey(key)) throw new UsageError('an API key must start with "ti_" followed by at least 20 characters of [A-Za-z0-9_-]');
    const keyHash = hashApiKey(key);
    const db = this.orm();
    if (db.select({ id: apiKeys.id }).from(apiKeys).where(eq(apiKeys.keyHash, keyHash)).get() !== undefined) {
      throw new ConflictError('this API key already exists');
    }
    const row = { id: newId('key'), orgId: org.id, name: input.name ?? '', prefix: keyPrefix(key), keyHash, createdAt: Date.now(), revokedAt: null };
    db.insert(apiKeys).values(row).run();
    return Promise.resolve({ id: row.id, orgId: org.id, orgName: org.name, name: row.name, prefix: row.prefix, createdAt: row.createdAt, revokedAt: null, key });
  }

  async hasKeyHash(sha256Hex: string): Promise<boolean> {
    return Promise.resolve(this.orm().select({ id: apiKeys.id }).from(apiKeys).where(eq(apiKeys.keyHash, sha256Hex)).get() !== undefined);
  }

  private keyRows(where?: ReturnType<typeof eq>): ApiKeyInfo[] {
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
    return (where === undefined ? q : q.where(where)).orderBy(asc(apiKeys.createdAt)).all();
  }

  async listKeys(filter?: { orgName?: string }): Promise<ApiKeyInfo[]> {
    if (filter?.orgName === undefined) return Promise.resolve(this.keyRows());
    const org = this.requireOrg(filter.orgName);
    return Promise.resolve(this.keyRows(eq(apiKeys.orgId, org.id)));
  }

  async revokeKey(prefixOrId: string): Promise<ApiKeyInfo> {
    const matches = [...this.keyRows(eq(apiKeys.id, prefixOrId)), ...this.keyRows(eq(apiKeys.prefix, prefixOrId))];
    const unique = [...new Map(matches.map((k) => [k.id, k])).values()];
    const [only] = unique;
    if (only === undefined) throw new UsageError(`no API key with id or prefix "${prefixOrId}"; see "trace-ingest keys list"`);
    if (unique.length > 1) throw new UsageError(`prefix "${prefixOrId}" matches ${unique.length} keys; revoke by id instead`);
    if (only.revokedAt !== null) return Promise.resolve(only);
    const revokedAt = Date.now();
    this.orm().update(apiKeys).set({ revokedAt }).where(and(eq(apiKeys.id, only.id), sql`${apiKeys.revokedAt} IS NULL`)).run();
    return Promise.resolve({ ...only, revokedAt });
  }

  async getMonthUsage(orgId: string, month: string): Promise<number> {
    this.raw();
    return Promise.resolve(Number(this.usageStmt?.get(orgId, month) ?? 0));
  }

  async addMonthUsage(orgId: string, month: string, n: number): Promise<number> {
    this.raw();
    return Promise.resolve(Number(this.addUsageStmt?.get(orgId, month, n) ?? 0));
  }

  async listPriceOverrides(): Promise<PriceOverrideRecord[]> {
    return Promise.resolve(
      this.orm()
        .select()
        .from(priceOverrides)
        .orderBy(asc(priceOverrides.model), asc(priceOverrides.orgId), asc(priceOverrides.provider), asc(priceOverrides.validFrom))
        .all(),
    );
  }

  async setPriceOverride(input: PriceOverrideInput): Promise<PriceOverrideRecord> {
    const db = this.orm();
    const row: PriceOverrideRecord = { id: newId('price'), createdAt: Date.now(), ...input };
    db.transaction((tx) => {
      tx.delete(priceOverrides)
        .where(
          and(
            eq(priceOverrides.orgId, input.orgId),
            eq(priceOverrides.provider, input.provider),
            eq(priceOverrides.model, input.model),
            eq(priceOverrides.validFrom, input.validFrom),
          ),
        )
        .run();
      tx.insert(priceOverrides).values(row).run();
      bumpVersion(tx);
    });
    return Promise.resolve(row);
  }

  async unsetPriceOverride(match: { orgId: string; provider: string; model: string; validFrom?: number }): Promise<number> {
    const db = this.orm();
    const conds = [eq(priceOverrides.orgId, match.orgId), eq(priceOverrides.provider, match.provider), eq(priceOverrides.model, match.model)];
    if (match.validFrom !== undefined) conds.push(eq(priceOverrides.validFrom, match.validFrom));
    let changes = 0;
    db.transaction((tx) => {
      changes = tx.delete(priceOverrides).where(and(...conds)).run().changes;
      if (changes > 0) bumpVersion(tx);
    });
    return Promise.resolve(changes);
  }

  async priceOverridesVersion(): Promise<string> {
    // Read before every batch: a prepared statement, not a query builder.
    this.raw();
    return Promise.resolve(String(this.versionStmt?.get(PRICE_VERSION_KEY) ?? '0'));
  }
}

const PRICE_VERSION_KEY = 'price_overrides_version';

function bumpVersion(tx: Pick<Db, 'insert'>): void {
  tx.insert(settings)
    .values({ key: PRICE_VERSION_KEY, value: '1' })
    .onConflictDoUpdate({ target: settings.key, set: { value: sql`CAST(CAST(${settings.value} AS INTEGER) + 1 AS TEXT)` } })
    .run();
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
