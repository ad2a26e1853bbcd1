import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { PostgresControlStore } from '@trace-ingest/store/control-store-postgres';
import { makeBulkPayload } from '../factories.js';
import { startChildServerForTest } from './support/child-server.js';
import { startTcpProxy } from './support/tcp-proxy.js';
import { timedFetch, timedIngest } from './support/timed.js';
import { PG_URL, withSchema } from './support/services.js';

/** The same URL through another port (the proxy's). */
function viaPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
}

/**
 * PostgreSQL that holds a lock or does not answer at all: a real server
 * process answers within its documented bounds (lock_timeout 1 s, query
 * timeout 4 s; /readyz 2 s) with 503 + Retry-After and JSON, /readyz names
 * the control store, and it serves again once PostgreSQL does.
 */
describe('a control store on PostgreSQL that is locked or frozen', () => {
  const schema = `ti_pgfault_${randomBytes(4).toString('hex')}`;
  let keys: PostgresControlStore;
  let admin: pg.Client;
  let key: string;
  const dirs: string[] = [];

  beforeAll(async () => {
    keys = new PostgresControlStore(withSchema(PG_URL, schema));
    await keys.start();
    await keys.createOrg({ name: 'acme' });
    ({ key } = await keys.createKey({ orgName: 'acme' }));
    admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
  });
  afterAll(async () => {
    await keys.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  const start = async (databaseUrl: string) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-pgfault-'));
    dirs.push(dir);
    return startChildServerForTest({ DATA_DIR: dir, DATABASE_URL: databaseUrl, FLUSH_INTERVAL_MS: '100' });
  };

  for (const table of ['api_keys', 'usage_months']) {
    it(`answers 503 within the lock timeout while ${table} is locked ACCESS EXCLUSIVE, and /readyz says so`, async () => {
      const server = await start(withSchema(PG_URL, schema));
      expect((await timedIngest(server.url, key, makeBulkPayload(1, 2))).status).toBe(202);

      // A migration or VACUUM FULL in another session.
      const locker = new pg.Client({ connectionString: PG_URL });
      await locker.connect();
      onTestFinished(() => locker.end());
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE ${schema}.${table} IN ACCESS EXCLUSIVE MODE`);
      const [answers, ready] = await Promise.all([
        Promise.all(Array.from({ length: 5 }, () => timedIngest(server.url, key, makeBulkPayload(1, 2), 8000))),
        timedFetch(`${server.url}/readyz`, {}, 8000),
      ]);
      await locker.query('ROLLBACK');

      for (const a of answers) {
        expect(a.status).toBe(503);
        expect(a.ms).toBeLessThan(3000);
        expect(a.retryAfter).toMatch(/^\d+$/);
        expect(a.body.error).toMatch(/PostgreSQL/);
      }
      expect(ready.status).toBe(503);
      expect(ready.ms).toBeLessThan(3000);
      expect((ready.body.checks as Record<string, string>)['control store']).not.toBe('ok');
      expect((ready.body.checks as Record<string, string>)['span store']).toBe('ok');

      expect((await timedIngest(server.url, key, makeBulkPayload(1, 2))).status).toBe(202);
      expect((await timedFetch(`${server.url}/readyz`)).status).toBe(200);
    });
  }

  it('answers 503 within the query timeout while PostgreSQL does not answer at all, and serves again after', async () => {
    const proxy = await startTcpProxy({ host: new URL(PG_URL).hostname, port: Number(new URL(PG_URL).port || 5432) });
    const server = await start(viaPort(withSchema(PG_URL, schema), proxy.port));
    expect((await timedIngest(server.url, key, makeBulkPayload(1, 2))).status).toBe(202);

    // Frozen: connections stay open, nothing comes back (SIGSTOP, a partition).
    proxy.pause();
    const [answers, ready] = await Promise.all([
      Promise.all(Array.from({ length: 3 }, () => timedIngest(server.url, key, makeBulkPayload(1, 2), 15_000))),
      timedFetch(`${server.url}/readyz`, {}, 15_000),
    ]);
    for (const a of answers) {
      expect(a.status).toBe(503);
      expect(a.ms).toBeLessThan(6000);
      expect(a.retryAfter).toMatch(/^\d+$/);
    }
    expect(ready.status).toBe(503);
    expect(ready.ms).toBeLessThan(3000);
    expect((ready.body.checks as Record<string, string>)['control store']).toMatch(/did not answer within 2000 ms/);
    proxy.resume();

    // Served again without a restart.
    let after = await timedIngest(server.url, key, makeBulkPayload(1, 2));
    for (let i = 0; i < 50 && after.status !== 202; i++) {
      await new Promise((r) => setTimeout(r, 200));
      after = await timedIngest(server.url, key, makeBulkPayload(1, 2));
    }
    expect(after.status).toBe(202);
  }, 60_000);
});
