import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, ConflictError, ServiceUnavailableError, UsageError } from '@trace-ingest/shared/errors';
import { hashApiKey } from '@trace-ingest/shared/ids';
import { PostgresKeyStore, parseDatabaseUrl } from './key-store-postgres.js';

// The PostgreSQL server of the test machine (trust auth on loopback); each run
// works in schemas of its own and drops them afterwards.
const DATABASE_URL = process.env.TI_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const RUN = `ti_test_${randomBytes(4).toString('hex')}`;

describe('PostgresKeyStore', () => {
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  const schemas = new Set<string>();
  let seq = 0;
  let store: PostgresKeyStore;

  function freshSchema(): string {
    const s = `${RUN}_${seq++}`;
    schemas.add(s);
    return s;
  }

  beforeAll(async () => {
    await admin.query('SELECT 1');
  });
  afterAll(async () => {
    for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    await admin.end();
  });
  beforeEach(async () => {
    store = new PostgresKeyStore(DATABASE_URL, { schema: freshSchema(), poolSize: 4 });
    await store.start();
  });
  afterEach(async () => {
    await store.close();
  });

  it('has a default plan after migrating, and migrating again changes nothing', async () => {
    await store.close();
    await store.start();
    const plans = await store.listPlans();
    expect(plans.map((p) => p.name)).toEqual(['default']);
    expect(plans[0]).toMatchObject({ id: 'plan_default', monthlySpans: 100_000_000, rateLimitRps: 1000 });
  });

  it('keeps its tables and migration journal inside its own schema', async () => {
    const { rows } = await admin.query<{ table_name: string }>(
      'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
      [store.schema],
    );
    expect(rows.map((r) => r.table_name)).toEqual(['__drizzle_migrations', 'api_keys', 'console_tokens', 'orgs', 'plans', 'price_overrides', 'settings', 'usage_months']);
  });

  it('takes the schema from ?schema= in the URL, keeping other options', async () => {
    const s = freshSchema();
    const url = `${DATABASE_URL}?schema=${s}&options=${encodeURIComponent('-c statement_timeout=5000')}`;
    expect(parseDatabaseUrl(url)).toEqual({ url: DATABASE_URL, schema: s, options: '-c statement_timeout=5000' });
    const other = new PostgresKeyStore(url);
    expect(other.schema).toBe(s);
    await other.start();
    try {
      await other.createOrg({ name: 'only-here' });
      expect((await other.listOrgs()).map((o) => o.name)).toEqual(['only-here']);
      expect(await store.listOrgs()).toEqual([]);
    } finally {
      await other.close();
    }
    expect(() => new PostgresKeyStore(`${DATABASE_URL}?schema=Bad-Name`)).toThrow(ConfigError);
  });

  it('migrates from three instances starting at once, and again, without error', async () => {
    const s = freshSchema();
    const stores = [0, 1, 2].map(() => new PostgresKeyStore(DATABASE_URL, { schema: s, poolSize: 2 }));
    try {
      await Promise.all([...stores, ...stores].map((k) => k.start()));
      await Promise.all(stores.map((k) => k.close()));
      await Promise.all(stores.map((k) => k.start()));
      expect((await stores[0]!.listPlans()).map((p) => p.name)).toEqual(['default']);
      const { rows } = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM "${s}"."__drizzle_migrations"`);
      expect(Number(rows[0]?.n)).toBe(fs.readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql')).length);
    } finally {
      await Promise.all(stores.map((k) => k.close()));
    }
  });

  it('resolves a key by its hash only, and not after revocation', async () => {
    await store.createOrg({ name: 'acme' });
    const created = await store.createKey({ orgName: 'acme', name: 'ci' });
    expect(created.key).toMatch(/^ti_[A-Za-z0-9_-]{43}$/);
    expect(created.prefix).toBe(created.key.slice(0, 12));
    const resolved = await store.resolveKeyHash(hashApiKey(created.key));
    expect(resolved).toMatchObject({ orgName: 'acme', planName: 'default', rateLimitRps: 1000, monthlySpans: 100_000_000, prefix: created.prefix });
    expect(JSON.stringify(await store.listKeys())).not.toContain(created.key);
    const revoked = await store.revokeKey(created.prefix);
    expect(typeof revoked.revokedAt).toBe('number');
    expect(await store.resolveKeyHash(hashApiKey(created.key))).toBeNull();
    expect((await store.revokeKey(created.id)).revokedAt).toBe(revoked.revokedAt);
  });

  it('sees a revocation and a plan change made by another instance on the next lookup', async () => {
    const other = new PostgresKeyStore(DATABASE_URL, { schema: store.schema, poolSize: 2 });
    await other.start();
    try {
      await store.createPlan({ name: 'tiny', monthlySpans: 10, rateLimitRps: 2 });
      await store.createOrg({ name: 'acme' });
      const k = await store.createKey({ orgName: 'acme' });
      const hash = hashApiKey(k.key);
      expect(await other.resolveKeyHash(hash)).toMatchObject({ planName: 'default' });
      await store.setOrgPlan('acme', 'tiny');
      expect(await other.resolveKeyHash(hash)).toMatchObject({ planName: 'tiny', monthlySpans: 10 });
      await store.revokeKey(k.id);
      expect(await other.resolveKeyHash(hash)).toBeNull();
    } finally {
      await other.close();
    }
  });

  it('moves an org to another plan at once', async () => {
    await store.createPlan({ name: 'tiny', monthlySpans: 10, rateLimitRps: 2 });
    await store.createOrg({ name: 'acme' });
    const k = await store.createKey({ orgName: 'acme' });
    await store.setOrgPlan('acme', 'tiny');
    expect(await store.resolveKeyHash(hashApiKey(k.key))).toMatchObject({ planName: 'tiny', monthlySpans: 10, rateLimitRps: 2 });
    expect(await store.updatePlan('tiny', { monthlySpans: 20 })).toMatchObject({ name: 'tiny', monthlySpans: 20, rateLimitRps: 2 });
    expect(await store.resolveKeyHash(hashApiKey(k.key))).toMatchObject({ monthlySpans: 20, rateLimitRps: 2 });
    expect(await store.getOrg('acme')).toMatchObject({ planName: 'tiny' });
  });

  it('refuses duplicates, unknown names and bad numbers with clear errors', async () => {
    const org = await store.createOrg({ name: 'acme' });
    await expect(store.createOrg({ name: 'acme' })).rejects.toBeInstanceOf(ConflictError);
    await expect(store.createOrg({ name: 'x', planName: 'nope' })).rejects.toThrow(/unknown plan "nope"/);
    await expect(store.createKey({ orgName: 'nope' })).rejects.toBeInstanceOf(UsageError);
    await expect(store.createPlan({ name: 'p', monthlySpans: -1, rateLimitRps: 1 })).rejects.toThrow(/>= 0/);
    await expect(store.createPlan({ name: 'p', monthlySpans: 1, rateLimitRps: 0 })).rejects.toThrow(/>= 1/);
    await expect(store.createPlan({ name: 'default', monthlySpans: 1, rateLimitRps: 1 })).rejects.toThrow(/plan "default" already exists/);
    await expect(store.updatePlan('nope', { monthlySpans: 1 })).rejects.toThrow(/unknown plan "nope"/);
    await expect(store.revokeKey('ti_missing')).rejects.toThrow(/no API key/);
    expect(await store.getOrg(org.id)).toMatchObject({ name: 'acme' });
    expect(await store.getOrg('nope')).toBeNull();
  });

  it('turns a race between two creators of one name into a ConflictError', async () => {
    const results = await Promise.allSettled([store.createOrg({ name: 'race' }), store.createOrg({ name: 'race' }), store.createOrg({ name: 'race' })]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ConflictError);
  });

  it('refuses an ambiguous prefix', async () => {
    await store.createOrg({ name: 'acme' });
    await store.createKey({ orgName: 'acme', key: 'ti_same_prefix_' + 'a'.repeat(20) });
    await store.createKey({ orgName: 'acme', key: 'ti_same_prefix_' + 'b'.repeat(20) });
    await expect(store.revokeKey('ti_same_pre')).rejects.toThrow(/no API key/);
    await expect(store.revokeKey('ti_same_pref')).rejects.toThrow(/matches 2 keys/);
    expect(await store.listKeys({ orgName: 'acme' })).toHaveLength(2);
  });

  it('counts usage per org and month, across restarts', async () => {
    const org = await store.createOrg({ name: 'acme' });
    expect(await store.addMonthUsage(org.id, '2026-11', 5)).toBe(5);
    expect(await store.addMonthUsage(org.id, '2026-11', 7)).toBe(12);
    await store.close();
    await store.start();
    expect(await store.getMonthUsage(org.id, '2026-11')).toBe(12);
    expect(await store.getMonthUsage(org.id, '2026-12')).toBe(0);
  });

  it('sums concurrent usage from two instances exactly', async () => {
    const org = await store.createOrg({ name: 'acme' });
    const other = new PostgresKeyStore(DATABASE_URL, { schema: store.schema, poolSize: 8 });
    await other.start();
    try {
      const adds = Array.from({ length: 200 }, (_, i) => [store.addMonthUsage(org.id, '2026-11', 1 + (i % 3)), other.addMonthUsage(org.id, '2026-11', 1 + (i % 3))]).flat();
      const totals = await Promise.all(adds);
      const expected = 2 * Array.from({ length: 200 }, (_, i) => 1 + (i % 3)).reduce((a, b) => a + b, 0);
      expect(await other.getMonthUsage(org.id, '2026-11')).toBe(expected);
      // Each caller saw a total that includes its own spans; the last one is the final total.
      expect(Math.min(...totals)).toBeGreaterThanOrEqual(1);
      expect(Math.max(...totals)).toBe(expected);
    } finally {
      await other.close();
    }
  });

  it('refuses a bad usage number, and a failed add does not hold up the next ones', async () => {
    const org = await store.createOrg({ name: 'acme' });
    await expect(store.addMonthUsage(org.id, '2026-11', 1.5)).rejects.toBeInstanceOf(UsageError);
    await expect(store.addMonthUsage(org.id, '2026-11', -1)).rejects.toThrow(/>= 0/);
    // Unknown org: the foreign key refuses it.
    await expect(Promise.all([store.addMonthUsage('org_missing', '2026-11', 1), store.addMonthUsage('org_missing', '2026-11', 2)])).rejects.toThrow();
    expect(await Promise.all([store.addMonthUsage(org.id, '2026-11', 1), store.addMonthUsage(org.id, '2026-11', 2)])).toContain(3);
  });

  it('accepts a supplied key once (headless init)', async () => {
    await store.createOrg({ name: 'acme' });
    const key = 'ti_' + 'a'.repeat(43);
    await store.createKey({ orgName: 'acme', key });
    expect(await store.hasKeyHash(hashApiKey(key))).toBe(true);
    await expect(store.createKey({ orgName: 'acme', key })).rejects.toBeInstanceOf(ConflictError);
    await expect(store.createKey({ orgName: 'acme', key: 'short' })).rejects.toBeInstanceOf(UsageError);
  });

  it('keeps price overrides and bumps their version on change', async () => {
    const v0 = await store.priceOverridesVersion();
    expect(v0).toBe('0');
    const base = { orgId: '', provider: '', model: 'my-model', validFrom: 0, inputPerMtok: '1', outputPerMtok: '2', cachedInputPerMtok: null, cacheWriteInputPerMtok: null, reasoningPerMtok: null, imageEach: null, webSearchEach: null, requestEach: null };
    await store.setPriceOverride(base);
    const second = await store.setPriceOverride({ ...base, inputPerMtok: '3', imageEach: '0.000001' });
    const list = await store.listPriceOverrides();
    expect(list).toHaveLength(1);
    expect(list[0]).toEqual(second);
    expect(list[0]?.inputPerMtok).toBe('3');
    expect(await store.priceOverridesVersion()).toBe('2');
    await Promise.all([1, 2, 3].map((i) => store.setPriceOverride({ ...base, validFrom: i })));
    expect(await store.priceOverridesVersion()).toBe('5');
    expect(await store.unsetPriceOverride({ orgId: '', provider: '', model: 'my-model', validFrom: 2 })).toBe(1);
    expect(await store.unsetPriceOverride({ orgId: '', provider: '', model: 'my-model' })).toBe(3);
    expect(await store.unsetPriceOverride({ orgId: '', provider: '', model: 'my-model' })).toBe(0);
    expect(await store.priceOverridesVersion()).toBe('7');
  });

  it('closes twice without error and answers 503 when the database is unreachable', async () => {
    await store.close();
    await store.close();
    const dead = new PostgresKeyStore('postgres://postgres@127.0.0.1:1/test');
    const t0 = performance.now();
    await expect(dead.start()).rejects.toBeInstanceOf(ServiceUnavailableError);
    expect(performance.now() - t0).toBeLessThan(3000);
    await dead.close();
  });

  it('ships migrations that name no schema, so any ?schema= works', () => {
    for (const f of fs.readdirSync(MIGRATIONS_DIR).filter((n) => n.endsWith('.sql'))) {
      expect(fs.readFileSync(`${MIGRATIONS_DIR}/${f}`, 'utf8'), f).not.toMatch(/"public"\./);
    }
  });
});

const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/postgres', import.meta.url));
