import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { utcMonth } from '@trace-ingest/shared/ids';
import { TraceIngest } from '@trace-ingest/sdk';
import { PostgresControlStore } from '@trace-ingest/store/control-store-postgres';
import { makeSpan, makeTrace } from '../factories.js';
import { startChildServerForTest, type ChildServer } from './support/child-server.js';
import { startTestServer } from './support/ingest-server.js';
import { timedIngest } from './support/timed.js';
import { PG_URL, REDIS_URL, withSchema } from './support/services.js';

/**
 * The quota count of a batch already in the write log is owed, not awaited:
 * a row lock on the org's usage row (another session's long transaction)
 * delays the count, never the answer, and a client that resends its batch
 * (to the same or another replica, as after a timeout behind a load
 * balancer) is charged once for it.
 */
describe('a batch in the write log is answered, and charged once', () => {
  const id = randomBytes(4).toString('hex');
  const schema = `ti_charge_${id}`;
  const prefix = `ti-charge-${id}`;
  let keys: PostgresControlStore;
  let admin: pg.Client;
  const dirs: string[] = [];

  beforeAll(async () => {
    keys = new PostgresControlStore(withSchema(PG_URL, schema));
    await keys.start();
    admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
  });
  afterAll(async () => {
    await keys.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
    const redis = new Redis(REDIS_URL);
    const stale = await redis.keys(`${prefix}*`);
    if (stale.length > 0) await redis.del(...stale);
    redis.disconnect();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  const replica = async (): Promise<ChildServer> => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-charge-'));
    dirs.push(dir);
    return startChildServerForTest({ DATA_DIR: dir, DATABASE_URL: withSchema(PG_URL, schema), REDIS_URL, REDIS_KEY_PREFIX: prefix });
  };

  it('answers at once while the usage row is locked, and counts each resent batch once across replicas', async () => {
    const org = await keys.createOrg({ name: 'acme' });
    const { key } = await keys.createKey({ orgName: 'acme' });
    const [a, b] = await Promise.all([replica(), replica()]);
    const month = utcMonth(Date.now());
    // The row exists, as it does for any org that sent this month.
    expect((await timedIngest(a!.url, key, { version: 'v1', traces: [makeTrace()] })).status).toBe(202);
    let before = 0;
    for (let i = 0; i < 50 && before === 0; i++) {
      before = await keys.getMonthUsage(org.id, month);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(before).toBe(1);

    const locker = new pg.Client({ connectionString: PG_URL });
    await locker.connect();
    onTestFinished(() => locker.end());
    await locker.query('BEGIN');
    await locker.query(`SELECT * FROM ${schema}.usage_months WHERE org_id = $1 FOR UPDATE`, [org.id]);

    // 25 batches of 2 spans, each sent to one replica with a 1 s client timeout, then sent again to the
    // other (its retry: the same spans, a new request), whatever the first answer was.
    const batches = Array.from({ length: 25 }, (_, i) => ({
      version: 'v1',
      traces: [makeTrace({ traceId: `charge-${id}-${i}`, spans: [makeSpan({ spanId: 'root' }), makeSpan({ spanId: 'child', parentSpanId: 'root' })] })],
    }));
    const answers = await Promise.all(
      batches.map(async (batch, i) => {
        const [first, second] = i % 2 === 0 ? [a!, b!] : [b!, a!];
        const one = await timedIngest(first.url, key, batch, 1000);
        // A retry sends the same spans; the order of traces and spans in the body does not matter.
        const resent = { ...batch, traces: batch.traces.map((t) => ({ ...t, spans: [...t.spans].reverse() })) };
        const two = await timedIngest(second.url, key, resent, 1000);
        return [one, two];
      }),
    );
    await new Promise((r) => setTimeout(r, 1000));
    await locker.query('ROLLBACK');

    for (const [one, two] of answers) {
      expect(one!.status).toBe(202);
      expect(two!.status).toBe(202);
      expect(one!.ms).toBeLessThan(1000);
    }
    let used = 0;
    for (let i = 0; i < 100 && used < 51; i++) {
      used = await keys.getMonthUsage(org.id, month);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Settled: nothing more arrives later.
    await new Promise((r) => setTimeout(r, 1000));
    used = await keys.getMonthUsage(org.id, month);
    expect(used).toBe(1 + 25 * 2);
  }, 90_000);
});

describe("the SDK's retry of a batch whose answer was lost", () => {
  it('is charged once', async () => {
    const t = await startTestServer();
    onTestFinished(() => t.close());
    const { key, orgId } = await t.newKey();
    // The first request reaches the server and is answered 202, but the answer never reaches the client
    // (a timeout, a reset connection): the SDK sends the same batch again.
    let lost = 0;
    const fetchLosingFirstAnswer: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (lost++ === 0) throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
      return res;
    };
    const c = new TraceIngest({
      baseUrl: t.url,
      apiKey: key,
      fetch: fetchLosingFirstAnswer,
      flushOnExit: false,
      retry: { initialDelayMs: 10, maxDelayMs: 50 },
    });
    const trace = c.startTrace({ name: 'lost-answer' });
    const root = trace.startSpan({ name: 'root', type: 'agent' });
    root.startSpan({ name: 'child', provider: 'openai', model: 'gpt-4o' }).end();
    root.end();
    expect(await c.flush(10_000)).toBe(true);
    expect(c.getStats()).toMatchObject({ sent: 2, retried: 1, failed: 0 });

    const month = utcMonth(Date.now());
    let used = 0;
    for (let i = 0; i < 50 && used < 2; i++) {
      used = await t.keys.getMonthUsage(orgId, month);
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(await t.keys.getMonthUsage(orgId, month)).toBe(2);
    expect(await t.spans('SELECT count(*)::INT AS n FROM spans')).toEqual([{ n: 2 }]);
  });
});
