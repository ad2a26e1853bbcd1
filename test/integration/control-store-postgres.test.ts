import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, ServiceUnavailableError } from '@trace-ingest/shared/errors';
import { hashApiKey } from '@trace-ingest/shared/ids';
import { PostgresControlStore, parseDatabaseUrl } from '../../packages/store/src/control-store-postgres.js';
import { controlStoreContract } from '../../packages/store/src/control-store.contract.js';

// The PostgreSQL server of the test machine (trust auth on loopback); each run
// works in schemas of its own and drops them afterwards.
const DATABASE_URL = process.env.TI_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const RUN = `ti_test_${randomBytes(4).toString('hex')}`;
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/postgres', import.meta.url));

const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
const schemas = new Set<string>();
let seq = 0;

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

describe('control store on PostgreSQL', () => {
  const open: PostgresControlStore[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  controlStoreContract(async () => {
    const store = new PostgresControlStore(DATABASE_URL, { schema: freshSchema(), poolSize: 4 });
    open.push(store);
    await store.start();
    return store;
  });
});

describe('PostgreSQL control store across processes', () => {
  let store: PostgresControlStore;
  beforeEach(async () => {
    store = new PostgresControlStore(DATABASE_URL, { schema: freshSchema(), poolSize: 4 });
    await store.start();
  });
  afterEach(async () => {
    await store.close();
  });

  it('keeps its tables and migration journal inside its own schema', async () => {
    const { rows } = await admin.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name', [
      store.schema,
    ]);
    expect(rows.map((r) => r.table_name)).toEqual([
      '__drizzle_migrations',
      'api_keys',
      'audit_log',
      'budget_events',
      'budgets',
      'console_tokens',
      'orgs',
      'plans',
      'price_adoptions',
      'price_catalogs',
      'price_overrides',
      'settings',
      'usage_batches',
      'usage_months',
    ]);
  });

  it('takes the schema from ?schema= in the URL, keeping other options', async () => {
    const s = freshSchema();
    const url = `${DATABASE_URL}?schema=${s}&options=${encodeURIComponent('-c statement_timeout=5000')}`;
    expect(parseDatabaseUrl(url)).toEqual({ url: DATABASE_URL, schema: s, options: '-c statement_timeout=5000' });
    const other = new PostgresControlStore(url);
    expect(other.schema).toBe(s);
    await other.start();
    try {
      await other.createOrg({ name: 'only-here' });
      expect((await other.listOrgs()).map((o) => o.name)).toEqual(['only-here']);
      expect(await store.listOrgs()).toEqual([]);
    } finally {
      await other.close();
    }
    expect(() => new PostgresControlStore(`${DATABASE_URL}?schema=Bad-Name`)).toThrow(ConfigError);
  });

  it('migrates from three instances starting at once, and again, without error', async () => {
    const s = freshSchema();
    const stores = [0, 1, 2].map(() => new PostgresControlStore(DATABASE_URL, { schema: s, poolSize: 2 }));
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

  it('sees a revocation and a plan change made by another instance on the next lookup', async () => {
    const other = new PostgresControlStore(DATABASE_URL, { schema: store.schema, poolSize: 2 });
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

  it('sums concurrent usage from two instances exactly', async () => {
    const org = await store.createOrg({ name: 'acme' });
    const other = new PostgresControlStore(DATABASE_URL, { schema: store.schema, poolSize: 8 });
    await other.start();
    try {
      const adds = Array.from({ length: 200 }, (_, i) => [
        store.addMonthUsage(org.id, '2026-11', 1 + (i % 3)),
        other.addMonthUsage(org.id, '2026-11', 1 + (i % 3)),
      ]).flat();
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

  it('answers 503 when the database is unreachable', async () => {
    const dead = new PostgresControlStore('postgres://postgres@127.0.0.1:1/test');
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
