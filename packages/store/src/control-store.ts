import { randomUUID } from 'node:crypto';
import { ConflictError, UsageError } from '@trace-ingest/shared/errors';
import { generateApiKey, hashApiKey, isWellFormedKey, keyPrefix, newId } from '@trace-ingest/shared/ids';
import { DEFAULT_SCOPES, parseCustomers, parseScopes, type KeyScope } from '@trace-ingest/shared/scopes';
import type {
  AdoptionRecord,
  ApiKeyInfo,
  AuditEntry,
  CatalogRecord,
  CreatedKey,
  ControlStore,
  Org,
  Plan,
  PriceOverrideInput,
  PriceOverrideRecord,
  ResolvedKey,
  UsageBatchCount,
} from './control-store-types.js';
import { DEFAULT_PLAN, USAGE_BATCH_MEMORY_MS } from './control-store-types.js';

/**
 * The control store: orgs, plans, API keys, monthly usage and price
 * overrides. Every rule (projections, conflict checks, revoke matching, plan
 * lookup, version bumps, default-plan seeding) and every message lives here;
 * a `ControlDriver` per dialect (SQLite, PostgreSQL) only runs SQL.
 *
 * The SQL is the subset both dialects read alike: `?` placeholders, upserts
 * with `ON CONFLICT ... DO UPDATE` over an aliased target, `RETURNING`, and
 * quoted aliases so PostgreSQL keeps their case.
 */

export interface SqlStatement {
  sql: string;
  params: readonly unknown[];
}

export interface ControlDriver {
  readonly kind: 'sqlite' | 'postgres';
  /** Connects and migrates the schema; called once per start. */
  open(): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
  /** The rows of one statement (none for a statement without RETURNING); 64-bit integers come back as numbers. */
  all<R>(sql: string, params: readonly unknown[]): Promise<R[]>;
  /** Runs the statements in one transaction; the rows of each. */
  transaction(statements: readonly SqlStatement[]): Promise<unknown[][]>;
  /** True for a failed insert that broke a unique constraint. */
  isUniqueViolation(e: unknown): boolean;
  /**
   * A token that stays the same while no row of `tables` can have changed: no commit by another connection and no
   * write of this one naming them. Absent where that cannot be told cheaply (PostgreSQL, written by several
   * replicas): callers then read every time.
   */
  version?(tables: readonly string[]): string;
}

/** A name (plan, org) or key the caller gave that the store does not hold. */
export class UnknownNameError extends UsageError {
  constructor(
    readonly what: 'plan' | 'org' | 'key',
    readonly given: string,
  ) {
    super(what === 'key' ? `no API key with id or prefix "${given}"` : `unknown ${what} "${given}"`);
  }
}

/** A key prefix that several keys share. */
export class AmbiguousKeyError extends UsageError {
  constructor(
    readonly prefix: string,
    readonly matches: number,
  ) {
    super(`prefix "${prefix}" matches ${matches} keys`);
  }
}

/** A name or key that already exists. */
export class AlreadyExistsError extends ConflictError {
  constructor(
    readonly what: 'plan' | 'org' | 'key',
    readonly given: string,
  ) {
    super(what === 'key' ? 'this API key already exists' : `${what} "${given}" already exists`);
  }
}

/** Quotas and rates are non-negative integers; a rate of 0 would lock the org out, so it must be >= 1. */
export function validatePlanNumbers(p: { monthlySpans?: number; rateLimitRps?: number }): void {
  if (p.monthlySpans !== undefined && (!Number.isSafeInteger(p.monthlySpans) || p.monthlySpans < 0)) {
    throw new UsageError(`monthly spans must be an integer >= 0 (got ${p.monthlySpans})`);
  }
  if (p.rateLimitRps !== undefined && (!Number.isSafeInteger(p.rateLimitRps) || p.rateLimitRps < 1)) {
    throw new UsageError(`rate limit must be an integer >= 1 request per second (got ${p.rateLimitRps})`);
  }
}

const PRICE_VERSION_KEY = 'price_overrides_version';
const CATALOG_KEY = 'price_catalog';
const CATALOG_COLUMNS = 'id, source, date, sha256, imported_at AS "importedAt", imported_by AS "importedBy"';
const ADOPTION_COLUMNS = 'id, provider, model, valid_from AS "validFrom", source, prices, created_at AS "createdAt"';
const SET_SETTING = 'INSERT INTO settings AS s (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value';

const PLAN_COLUMNS = `id, name, monthly_spans AS "monthlySpans", rate_limit_rps AS "rateLimitRps", created_at AS "createdAt"`;
const ORG_SELECT = `SELECT o.id AS id, o.name AS name, o.plan_id AS "planId", p.name AS "planName", o.created_at AS "createdAt",
       o.retention_days AS "retentionDays", o.text_days AS "textDays", o.content_policy AS "contentPolicy"
  FROM orgs o JOIN plans p ON p.id = o.plan_id`;
const KEY_SELECT = `SELECT k.id AS id, k.org_id AS "orgId", o.name AS "orgName", k.name AS name, k.prefix AS prefix,
       k.created_at AS "createdAt", k.revoked_at AS "revokedAt", k.scopes AS scopes, k.customers AS customers
  FROM api_keys k JOIN orgs o ON o.id = k.org_id`;

/** A key's scopes and customers as stored (comma list, JSON array) to what callers see. */
function withGrant<T extends { scopes: unknown; customers: unknown }>(
  row: T,
): Omit<T, 'scopes' | 'customers'> & { scopes: KeyScope[]; customers: string[] | null } {
  return {
    ...row,
    scopes: parseScopes(String(row.scopes)),
    customers: typeof row.customers === 'string' ? (JSON.parse(row.customers) as string[]) : null,
  };
}

/** Price override fields and their columns, in insert order. */
const OVERRIDE_FIELDS = [
  ['id', 'id'],
  ['orgId', 'org_id'],
  ['provider', 'provider'],
  ['model', 'model'],
  ['validFrom', 'valid_from'],
  ['inputPerMtok', 'input_per_mtok'],
  ['outputPerMtok', 'output_per_mtok'],
  ['cachedInputPerMtok', 'cached_input_per_mtok'],
  ['cacheWriteInputPerMtok', 'cache_write_input_per_mtok'],
  ['reasoningPerMtok', 'reasoning_per_mtok'],
  ['imageEach', 'image_each'],
  ['webSearchEach', 'web_search_each'],
  ['requestEach', 'request_each'],
  ['createdAt', 'created_at'],
] as const satisfies readonly (readonly [keyof PriceOverrideRecord, string])[];
const OVERRIDE_KEY_COLUMNS = new Set(['org_id', 'provider', 'model', 'valid_from']);
const OVERRIDE_COLUMNS = OVERRIDE_FIELDS.map(([f, c]) => `${c} AS "${f}"`).join(', ');
// An upsert rather than delete + insert: two writers of the same override cannot collide on the unique index.
const UPSERT_OVERRIDE = `INSERT INTO price_overrides (${OVERRIDE_FIELDS.map(([, c]) => c).join(', ')})
  VALUES (${OVERRIDE_FIELDS.map(() => '?').join(', ')})
  ON CONFLICT (org_id, provider, model, valid_from) DO UPDATE SET ${OVERRIDE_FIELDS.filter(([, c]) => !OVERRIDE_KEY_COLUMNS.has(c))
    .map(([, c]) => `${c} = excluded.${c}`)
    .join(', ')}`;
const BUMP_PRICE_VERSION: SqlStatement = {
  sql: `INSERT INTO settings AS s (key, value) VALUES (?, '1')
        ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(s.value AS BIGINT) + 1 AS TEXT)`,
  params: [PRICE_VERSION_KEY],
};

/** The tables a resolved key is read from: a write naming any of them (or another connection's commit) drops the resolved keys. */
const KEY_TABLES = ['api_keys', 'orgs', 'plans'] as const;
const SETTINGS_TABLES = ['settings'] as const;
/** Resolved keys kept at most (a key is a few hundred bytes); past it they are read again. */
const KEYS_KEPT = 10_000;

interface UsageBatch {
  /** Spans of the waiting adds, not yet sent. */
  spans: number;
  waiters: { resolve: (total: number) => void; reject: (e: unknown) => void }[];
  running: boolean;
}

export class SqlControlStore implements ControlStore {
  /** Resolved keys by hash while the driver's version of KEY_TABLES stays `keysVersion` (SQLite): a request's lookup was ~80 µs of CPU. */
  private readonly keys = new Map<string, ResolvedKey>();
  private keysVersion: string | undefined;
  private priceVersion: string | undefined;
  private priceVersionAt: string | undefined;
  private started = false;
  private starting: Promise<void> | undefined;
  private readonly usageBatches = new Map<string, UsageBatch>();
  /** When batches older than USAGE_BATCH_MEMORY_MS were last deleted (0: not yet in this process). */
  private batchesPrunedAt = 0;

  constructor(private readonly driver: ControlDriver) {}

  get kind(): 'sqlite' | 'postgres' {
    return this.driver.kind;
  }

  async start(): Promise<void> {
    if (this.started) return;
    // Callers that start the same instance at once share one start.
    this.starting ??= this.open().finally(() => {
      this.starting = undefined;
    });
    await this.starting;
  }

  private async open(): Promise<void> {
    await this.driver.open();
    try {
      // Several processes may seed at once: the insert of the loser does nothing.
      await this.driver.all(`INSERT INTO plans (id, name, monthly_spans, rate_limit_rps, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, [
        'plan_default',
        DEFAULT_PLAN.name,
        DEFAULT_PLAN.monthlySpans,
        DEFAULT_PLAN.rateLimitRps,
        Date.now(),
      ]);
    } catch (e) {
      await this.driver.close();
      throw e;
    }
    this.started = true;
  }

  async close(): Promise<void> {
    this.started = false;
    await this.driver.close();
  }

  /** Reads the tables every ingest request reads, so a lock held on one of them (a migration, VACUUM FULL) fails the ping too. */
  async ping(): Promise<void> {
    await this.driver.all(
      'SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM api_keys LIMIT 1) AS k) + (SELECT COUNT(*) FROM (SELECT 1 FROM usage_months LIMIT 1) AS u) AS n',
      [],
    );
  }

  async resolveKeyHash(sha256Hex: string): Promise<ResolvedKey | null> {
    // Taken before the read: a change after it leaves a token the next request does not match.
    const version = this.driver.version?.(KEY_TABLES);
    if (version !== undefined) {
      if (version !== this.keysVersion) {
        this.keys.clear();
        this.keysVersion = version;
      }
      const known = this.keys.get(sha256Hex);
      if (known !== undefined) return known;
    }
    const [row] = await this.driver.all<Omit<ResolvedKey, 'scopes' | 'customers'> & { scopes: string; customers: string | null }>(
      `SELECT k.id AS "keyId", k.prefix AS prefix, o.id AS "orgId", o.name AS "orgName", p.name AS "planName",
              p.monthly_spans AS "monthlySpans", p.rate_limit_rps AS "rateLimitRps",
              o.content_policy AS "contentPolicy", o.text_days AS "textDays", k.scopes AS scopes, k.customers AS customers
         FROM api_keys k JOIN orgs o ON o.id = k.org_id JOIN plans p ON p.id = o.plan_id
        WHERE k.key_hash = ? AND k.revoked_at IS NULL`,
      [sha256Hex],
    );
    if (row === undefined) return null;
    const resolved = Object.freeze(withGrant(row));
    if (version !== undefined) {
      if (this.keys.size >= KEYS_KEPT) this.keys.clear();
      this.keys.set(sha256Hex, resolved);
    }
    return resolved;
  }

  /** Runs an insert; a unique violation (a racing creator) becomes the caller's conflict. */
  private async insert(sql: string, params: readonly unknown[], conflict: () => Error): Promise<void> {
    try {
      await this.driver.all(sql, params);
    } catch (e) {
      if (this.driver.isUniqueViolation(e)) throw conflict();
      throw e;
    }
  }

  async createPlan(input: { name: string; monthlySpans: number; rateLimitRps: number }): Promise<Plan> {
    validatePlanNumbers(input);
    const conflict = (): Error => new AlreadyExistsError('plan', input.name);
    if ((await this.driver.all('SELECT id FROM plans WHERE name = ?', [input.name])).length > 0) throw conflict();
    const row = { id: newId('plan'), name: input.name, monthlySpans: input.monthlySpans, rateLimitRps: input.rateLimitRps, createdAt: Date.now() };
    await this.insert(
      'INSERT INTO plans (id, name, monthly_spans, rate_limit_rps, created_at) VALUES (?, ?, ?, ?, ?)',
      [row.id, row.name, row.monthlySpans, row.rateLimitRps, row.createdAt],
      conflict,
    );
    return row;
  }

  async updatePlan(name: string, patch: { monthlySpans?: number; rateLimitRps?: number }): Promise<Plan> {
    validatePlanNumbers(patch);
    // One statement, so two concurrent patches of different fields both stick.
    const [row] = await this.driver.all<Plan>(
      `UPDATE plans SET monthly_spans = COALESCE(?, monthly_spans), rate_limit_rps = COALESCE(?, rate_limit_rps)
        WHERE name = ? RETURNING ${PLAN_COLUMNS}`,
      [patch.monthlySpans ?? null, patch.rateLimitRps ?? null, name],
    );
    if (row === undefined) throw new UnknownNameError('plan', name);
    return row;
  }

  async listPlans(): Promise<Plan[]> {
    return this.driver.all<Plan>(`SELECT ${PLAN_COLUMNS} FROM plans ORDER BY name`, []);
  }

  private async planByName(name: string): Promise<Plan> {
    const [p] = await this.driver.all<Plan>(`SELECT ${PLAN_COLUMNS} FROM plans WHERE name = ?`, [name]);
    if (p === undefined) throw new UnknownNameError('plan', name);
    return p;
  }

  async createOrg(input: { name: string; planName?: string }): Promise<Org> {
    const plan = await this.planByName(input.planName ?? DEFAULT_PLAN.name);
    const conflict = (): Error => new AlreadyExistsError('org', input.name);
    if ((await this.driver.all('SELECT id FROM orgs WHERE name = ?', [input.name])).length > 0) throw conflict();
    const row = { id: newId('org'), name: input.name, planId: plan.id, createdAt: Date.now() };
    await this.insert('INSERT INTO orgs (id, name, plan_id, created_at) VALUES (?, ?, ?, ?)', [row.id, row.name, row.planId, row.createdAt], conflict);
    return { ...row, planName: plan.name, retentionDays: null, textDays: null, contentPolicy: null };
  }

  async setOrgPlan(orgName: string, planName: string): Promise<Org> {
    const org = await this.requireOrg(orgName);
    const plan = await this.planByName(planName);
    await this.driver.all('UPDATE orgs SET plan_id = ? WHERE id = ?', [plan.id, org.id]);
    return { ...org, planId: plan.id, planName: plan.name };
  }

  async setOrgRetention(orgName: string, r: { days?: number | null; textDays?: number | null }): Promise<Org> {
    for (const [what, v] of [
      ['days', r.days],
      ['text days', r.textDays],
    ] as const) {
      if (v !== undefined && v !== null && (!Number.isSafeInteger(v) || v < 0 || v > 36_500)) {
        throw new UsageError(`retention ${what} must be an integer from 0 (keep forever) to 36500 (got ${v})`);
      }
    }
    const org = await this.requireOrg(orgName);
    const next = { retentionDays: r.days === undefined ? org.retentionDays : r.days, textDays: r.textDays === undefined ? org.textDays : r.textDays };
    await this.driver.all('UPDATE orgs SET retention_days = ?, text_days = ? WHERE id = ?', [next.retentionDays, next.textDays, org.id]);
    return { ...org, ...next };
  }

  async setOrgContentPolicy(orgName: string, policyJson: string | null): Promise<Org> {
    const org = await this.requireOrg(orgName);
    await this.driver.all('UPDATE orgs SET content_policy = ? WHERE id = ?', [policyJson, org.id]);
    return { ...org, contentPolicy: policyJson };
  }

  async appendAudit(e: Omit<AuditEntry, 'id' | 'at'> & { at?: number }): Promise<AuditEntry> {
    const row: AuditEntry = {
      id: newId('audit'),
      at: e.at ?? Date.now(),
      actor: e.actor,
      action: e.action,
      orgId: e.orgId,
      target: e.target,
      detail: e.detail,
    };
    await this.driver.all('INSERT INTO audit_log (id, at, actor, action, org_id, target, detail) VALUES (?, ?, ?, ?, ?, ?, ?)', [
      row.id,
      row.at,
      row.actor,
      row.action,
      row.orgId,
      row.target,
      row.detail,
    ]);
    return row;
  }

  async listAudit(filter?: { orgId?: string; limit?: number }): Promise<AuditEntry[]> {
    const cols = 'id, at, actor, action, org_id AS "orgId", target, detail';
    const limit = Math.min(Math.max(filter?.limit ?? 100, 1), 10_000);
    if (filter?.orgId === undefined) return this.driver.all<AuditEntry>(`SELECT ${cols} FROM audit_log ORDER BY at DESC, id DESC LIMIT ?`, [limit]);
    return this.driver.all<AuditEntry>(`SELECT ${cols} FROM audit_log WHERE org_id = ? ORDER BY at DESC, id DESC LIMIT ?`, [filter.orgId, limit]);
  }

  async listOrgs(): Promise<Org[]> {
    return this.driver.all<Org>(`${ORG_SELECT} ORDER BY o.name`, []);
  }

  /** By name first, then by id. */
  async getOrg(nameOrId: string): Promise<Org | null> {
    const [byName] = await this.driver.all<Org>(`${ORG_SELECT} WHERE o.name = ?`, [nameOrId]);
    if (byName !== undefined) return byName;
    const [byId] = await this.driver.all<Org>(`${ORG_SELECT} WHERE o.id = ?`, [nameOrId]);
    return byId ?? null;
  }

  private async requireOrg(nameOrId: string): Promise<Org> {
    const org = await this.getOrg(nameOrId);
    if (org === null) throw new UnknownNameError('org', nameOrId);
    return org;
  }

  async createKey(input: {
    orgName: string;
    name?: string;
    key?: string;
    scopes?: readonly KeyScope[];
    customers?: readonly string[] | null;
  }): Promise<CreatedKey> {
    const org = await this.requireOrg(input.orgName);
    const key = input.key ?? generateApiKey();
    if (!isWellFormedKey(key)) throw new UsageError('an API key must start with "ti_" followed by at least 20 characters of [A-Za-z0-9_-]');
    const scopes = parseScopes((input.scopes ?? DEFAULT_SCOPES).join(','));
    const customers = input.customers === undefined || input.customers === null ? null : parseCustomers(input.customers);
    if (customers !== null && !scopes.includes('budget:read'))
      throw new UsageError('--customer limits what a budget:read key reads: give --scope budget:read too');
    const keyHash = hashApiKey(key);
    const conflict = (): Error => new AlreadyExistsError('key', '');
    if (await this.hasKeyHash(keyHash)) throw conflict();
    const row = {
      id: newId('key'),
      orgId: org.id,
      orgName: org.name,
      name: input.name ?? '',
      prefix: keyPrefix(key),
      createdAt: Date.now(),
      revokedAt: null,
      scopes,
      customers,
    };
    await this.insert(
      'INSERT INTO api_keys (id, org_id, name, prefix, key_hash, created_at, scopes, customers) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      [row.id, row.orgId, row.name, row.prefix, keyHash, row.createdAt, scopes.join(','), customers === null ? null : JSON.stringify(customers)],
      conflict,
    );
    return { ...row, key };
  }

  async hasKeyHash(sha256Hex: string): Promise<boolean> {
    return (await this.driver.all('SELECT 1 AS one FROM api_keys WHERE key_hash = ?', [sha256Hex])).length > 0;
  }

  async listKeys(filter?: { orgName?: string }): Promise<ApiKeyInfo[]> {
    if (filter?.orgName === undefined) return (await this.driver.all<ApiKeyInfo>(`${KEY_SELECT} ORDER BY k.created_at, k.id`, [])).map(withGrant);
    const org = await this.requireOrg(filter.orgName);
    return (await this.driver.all<ApiKeyInfo>(`${KEY_SELECT} WHERE k.org_id = ? ORDER BY k.created_at, k.id`, [org.id])).map(withGrant);
  }

  async revokeKey(prefixOrId: string): Promise<ApiKeyInfo> {
    const matches = (await this.driver.all<ApiKeyInfo>(`${KEY_SELECT} WHERE k.id = ? OR k.prefix = ?`, [prefixOrId, prefixOrId])).map(withGrant);
    const [only] = matches;
    if (only === undefined) throw new UnknownNameError('key', prefixOrId);
    if (matches.length > 1) throw new AmbiguousKeyError(prefixOrId, matches.length);
    if (only.revokedAt !== null) return only;
    // When another process revoked it meanwhile, its instant is the one that stands.
    const [row] = await this.driver.all<{ revokedAt: number }>(
      'UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING revoked_at AS "revokedAt"',
      [Date.now(), only.id],
    );
    if (row !== undefined) return { ...only, revokedAt: row.revokedAt };
    const [again] = await this.driver.all<ApiKeyInfo>(`${KEY_SELECT} WHERE k.id = ?`, [only.id]);
    return again === undefined ? only : withGrant(again);
  }

  async getMonthUsage(orgId: string, month: string): Promise<number> {
    const [row] = await this.driver.all<{ spans: number }>('SELECT spans FROM usage_months WHERE org_id = ? AND month = ?', [orgId, month]);
    return row?.spans ?? 0;
  }

  /**
   * Every request of an org updates the same row, and in PostgreSQL each
   * update holds that row's lock until its commit is flushed, so updates of
   * one org run one after another: a few hundred a second. While one is in
   * flight, the adds that arrive for the same org and month wait and then go
   * as one upsert; each caller gets the total after its spans were added.
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

  async addMonthUsageOnce(orgId: string, month: string, batches: readonly UsageBatchCount[], now: number): Promise<number> {
    for (const b of batches) if (!Number.isSafeInteger(b.spans) || b.spans < 0) throw new UsageError(`usage to add must be an integer >= 0 (got ${b.spans})`);
    const addId = randomUUID();
    const statements: SqlStatement[] = [];
    if (now - this.batchesPrunedAt >= 60_000) {
      this.batchesPrunedAt = now;
      statements.push({ sql: 'DELETE FROM usage_batches WHERE created_at < ?', params: [now - USAGE_BATCH_MEMORY_MS] });
    }
    // Within the bound parameters of one statement in either dialect.
    for (let i = 0; i < batches.length; i += 500) {
      const part = batches.slice(i, i + 500);
      statements.push({
        sql: `INSERT INTO usage_batches (org_id, batch_id, spans, add_id, created_at) VALUES ${part.map(() => '(?, ?, ?, ?, ?)').join(', ')}
              ON CONFLICT (org_id, batch_id) DO NOTHING`,
        params: part.flatMap((b) => [orgId, b.id, b.spans, addId, now]),
      });
    }
    // Only the batches this add inserted count; `WHERE true` lets SQLite read the upsert after a SELECT.
    statements.push({
      sql: `INSERT INTO usage_months AS u (org_id, month, spans)
            SELECT ?, ?, COALESCE(SUM(spans), 0) FROM usage_batches WHERE add_id = ? AND true
            ON CONFLICT (org_id, month) DO UPDATE SET spans = u.spans + excluded.spans RETURNING spans`,
      params: [orgId, month, addId],
    });
    const results = await this.driver.transaction(statements);
    const [row] = results.at(-1) as { spans: number }[];
    return row?.spans ?? 0;
  }

  private async flushUsage(key: string, batch: UsageBatch, orgId: string, month: string): Promise<void> {
    batch.running = true;
    while (batch.waiters.length > 0) {
      const waiters = batch.waiters.splice(0);
      const spans = batch.spans;
      batch.spans = 0;
      try {
        const [row] = await this.driver.all<{ spans: number }>(
          `INSERT INTO usage_months AS u (org_id, month, spans) VALUES (?, ?, ?)
           ON CONFLICT (org_id, month) DO UPDATE SET spans = u.spans + excluded.spans RETURNING spans`,
          [orgId, month, spans],
        );
        const total = row?.spans ?? 0;
        for (const w of waiters) w.resolve(total);
      } catch (e) {
        for (const w of waiters) w.reject(e);
      }
    }
    this.usageBatches.delete(key);
  }

  async listPriceOverrides(): Promise<PriceOverrideRecord[]> {
    return this.driver.all<PriceOverrideRecord>(`SELECT ${OVERRIDE_COLUMNS} FROM price_overrides ORDER BY model, org_id, provider, valid_from`, []);
  }

  /** Replaces the override with the same (org, provider, model, validFrom) and bumps the version, in one transaction. */
  async setPriceOverride(input: PriceOverrideInput): Promise<PriceOverrideRecord> {
    const row: PriceOverrideRecord = { id: newId('price'), createdAt: Date.now(), ...input };
    await this.driver.transaction([{ sql: UPSERT_OVERRIDE, params: OVERRIDE_FIELDS.map(([f]) => row[f]) }, BUMP_PRICE_VERSION]);
    return row;
  }

  async unsetPriceOverride(match: { orgId: string; provider: string; model: string; validFrom?: number }): Promise<number> {
    const where = `org_id = ? AND provider = ? AND model = ?${match.validFrom === undefined ? '' : ' AND valid_from = ?'}`;
    const params = [match.orgId, match.provider, match.model, ...(match.validFrom === undefined ? [] : [match.validFrom])];
    // The version moves only when something is removed. Should another writer remove the rows between
    // the count and the delete, the version moves once too often, which only makes readers reload.
    const matching = await this.driver.all(`SELECT id FROM price_overrides WHERE ${where}`, params);
    if (matching.length === 0) return 0;
    const [deleted = []] = await this.driver.transaction([{ sql: `DELETE FROM price_overrides WHERE ${where} RETURNING id`, params }, BUMP_PRICE_VERSION]);
    return deleted.length;
  }

  async importCatalog(c: Omit<CatalogRecord, 'id' | 'importedAt'> & { data: string }): Promise<{ record: CatalogRecord; created: boolean }> {
    const [seen] = await this.driver.all<CatalogRecord>(`SELECT ${CATALOG_COLUMNS} FROM price_catalogs WHERE sha256 = ?`, [c.sha256]);
    const record: CatalogRecord = seen ?? {
      id: newId('catalog'),
      source: c.source,
      date: c.date,
      sha256: c.sha256,
      importedAt: Date.now(),
      importedBy: c.importedBy,
    };
    const insert: SqlStatement = {
      sql: 'INSERT INTO price_catalogs (id, source, date, sha256, data, imported_at, imported_by) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING',
      params: [record.id, record.source, record.date, record.sha256, c.data, record.importedAt, record.importedBy],
    };
    await this.driver.transaction(seen === undefined ? [insert] : []);
    // Two importers of the same file at once: the row that stands is the one put in force.
    const [stored = record] = await this.driver.all<CatalogRecord>(`SELECT ${CATALOG_COLUMNS} FROM price_catalogs WHERE sha256 = ?`, [c.sha256]);
    await this.driver.transaction([{ sql: SET_SETTING, params: [CATALOG_KEY, stored.id] }, BUMP_PRICE_VERSION]);
    return { record: stored, created: seen === undefined && stored.id === record.id };
  }

  async listCatalogs(): Promise<CatalogRecord[]> {
    return this.driver.all<CatalogRecord>(`SELECT ${CATALOG_COLUMNS} FROM price_catalogs ORDER BY imported_at, id`, []);
  }

  async activeCatalog(): Promise<(CatalogRecord & { data: string }) | null> {
    const [row] = await this.driver.all<CatalogRecord & { data: string }>(
      `SELECT ${CATALOG_COLUMNS}, data FROM price_catalogs WHERE id = (SELECT value FROM settings WHERE key = ?)`,
      [CATALOG_KEY],
    );
    return row ?? null;
  }

  async useCatalog(idOrSha: string | null): Promise<CatalogRecord | null> {
    if (idOrSha === null) {
      await this.driver.transaction([{ sql: 'DELETE FROM settings WHERE key = ?', params: [CATALOG_KEY] }, BUMP_PRICE_VERSION]);
      return null;
    }
    const hex = idOrSha.toLowerCase();
    const matches = await this.driver.all<CatalogRecord>(`SELECT ${CATALOG_COLUMNS} FROM price_catalogs WHERE id = ? OR (? <> '' AND sha256 LIKE ?)`, [
      idOrSha,
      /^[0-9a-f]{6,64}$/.test(hex) ? hex : '',
      `${hex}%`,
    ]);
    const [only] = matches;
    if (only === undefined) throw new UsageError(`no imported catalog with id or sha256 "${idOrSha}" (see: trace-ingest prices catalogs)`);
    if (matches.length > 1) throw new UsageError(`"${idOrSha}" matches ${matches.length} catalogs: give more of the sha256`);
    await this.driver.transaction([{ sql: SET_SETTING, params: [CATALOG_KEY, only.id] }, BUMP_PRICE_VERSION]);
    return only;
  }

  async listAdoptions(): Promise<AdoptionRecord[]> {
    return this.driver.all<AdoptionRecord>(`SELECT ${ADOPTION_COLUMNS} FROM price_adoptions ORDER BY provider, model`, []);
  }

  async setAdoption(a: Omit<AdoptionRecord, 'id' | 'createdAt'>): Promise<AdoptionRecord> {
    const row: AdoptionRecord = { id: newId('price'), createdAt: Date.now(), ...a };
    await this.driver.transaction([
      {
        sql: `INSERT INTO price_adoptions AS a (id, provider, model, valid_from, source, prices, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
              ON CONFLICT (provider, model) DO UPDATE SET valid_from = excluded.valid_from, source = excluded.source, prices = excluded.prices,
              created_at = excluded.created_at`,
        params: [row.id, row.provider, row.model, row.validFrom, row.source, row.prices, row.createdAt],
      },
      BUMP_PRICE_VERSION,
    ]);
    return row;
  }

  async removeAdoption(model: string, provider?: string): Promise<number> {
    const where = provider === undefined ? 'model = ?' : 'model = ? AND provider = ?';
    const params = provider === undefined ? [model] : [model, provider];
    const [deleted = []] = await this.driver.transaction([{ sql: `DELETE FROM price_adoptions WHERE ${where} RETURNING id`, params }, BUMP_PRICE_VERSION]);
    return deleted.length;
  }

  async priceOverridesVersion(): Promise<string> {
    // Asked before every batch: read again only when the settings may have changed.
    const version = this.driver.version?.(SETTINGS_TABLES);
    if (version !== undefined && version === this.priceVersionAt && this.priceVersion !== undefined) return this.priceVersion;
    const [row] = await this.driver.all<{ value: string }>('SELECT value FROM settings WHERE key = ?', [PRICE_VERSION_KEY]);
    this.priceVersion = row?.value ?? '0';
    this.priceVersionAt = version;
    return this.priceVersion;
  }
}
