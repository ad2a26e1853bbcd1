import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { QuotaExceededError, RateLimitedError, ServiceUnavailableError } from '@trace-ingest/shared/errors';
import { utcMonth } from '@trace-ingest/shared/ids';
import { PostgresControlStore } from '@trace-ingest/store/control-store-postgres';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { RedisQuotaCounter, RedisRateLimiter, createRedisClient, waitForRedis } from '../../packages/server/src/redis-limits.js';

// The Redis server of the test machine is shared with other runs: every key
// this file writes starts with its own prefix, and only those are deleted.
const REDIS_URL = process.env.TI_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env.TI_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const PREFIX = `ti_test_${randomBytes(4).toString('hex')}`;
const NOW = Date.UTC(2026, 10, 22, 12);
const MONTH = utcMonth(NOW);
let batchSeq = 0;
/** One distinct batch of n spans. */
const batch = (n: number) => [{ id: `batch-${++batchSeq}`, spans: n }];

async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

describe('Redis-shared limits', () => {
  let admin: Redis;
  let dir: string;
  let seq = 0;
  const closers: (() => Promise<void>)[] = [];

  async function client(): Promise<Redis> {
    const c = createRedisClient(REDIS_URL);
    closers.push(async () => {
      await c.quit();
    });
    await waitForRedis(c);
    return c;
  }

  async function keyStore(): Promise<SqliteControlStore> {
    const s = new SqliteControlStore(path.join(dir, 'keys.sqlite'));
    await s.start();
    closers.push(() => s.close());
    return s;
  }

  beforeAll(async () => {
    admin = createRedisClient(REDIS_URL);
    await waitForRedis(admin);
  });
  afterAll(async () => {
    await deletePrefix(admin, PREFIX);
    await admin.quit();
  });
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-redis-'));
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('shares one budget of N per second between two limiters', async () => {
    const prefix = `${PREFIX}:${seq++}`;
    const a = new RedisRateLimiter(await client(), { keyPrefix: prefix });
    const b = new RedisRateLimiter(await client(), { keyPrefix: prefix });
    closers.push(
      () => a.close(),
      () => b.close(),
    );
    const rps = 6;
    const started = Date.now();
    const results = await Promise.allSettled(Array.from({ length: rps + 1 }, (_, i) => (i % 2 === 0 ? a : b).consume('key_shared', rps)));
    // The window is one second from the first request; all of these landed in it.
    expect(Date.now() - started).toBeLessThan(900);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(refused).toHaveLength(1);
    const err: unknown = refused[0]?.reason;
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect((err as RateLimitedError).headers['Retry-After']).toBe('1');
    // Another key has a budget of its own.
    await expect(b.consume('key_other', rps)).resolves.toBeUndefined();
  });

  it('refills the shared budget after the window', async () => {
    const prefix = `${PREFIX}:${seq++}`;
    const a = new RedisRateLimiter(await client(), { keyPrefix: prefix });
    const b = new RedisRateLimiter(await client(), { keyPrefix: prefix });
    closers.push(
      () => a.close(),
      () => b.close(),
    );
    await a.consume('k', 1);
    await expect(b.consume('k', 1)).rejects.toBeInstanceOf(RateLimitedError);
    await new Promise((r) => setTimeout(r, 1100));
    await expect(b.consume('k', 1)).resolves.toBeUndefined();
  });

  it('counts quota exactly across two counters adding at once', async () => {
    const prefix = `${PREFIX}:${seq++}`;
    const storeA = await keyStore();
    const storeB = await keyStore();
    const org = await storeA.createOrg({ name: 'acme' });
    const a = new RedisQuotaCounter(await client(), storeA, { keyPrefix: prefix });
    const b = new RedisQuotaCounter(await client(), storeB, { keyPrefix: prefix });
    closers.push(
      () => a.close(),
      () => b.close(),
    );
    const adds = Array.from({ length: 150 }, (_, i) => [a.add(org.id, batch(1 + (i % 4)), NOW), b.add(org.id, batch(2), NOW)]).flat();
    await Promise.all(adds);
    const expected = Array.from({ length: 150 }, (_, i) => 1 + (i % 4) + 2).reduce((x, y) => x + y, 0);
    expect(await storeA.getMonthUsage(org.id, MONTH)).toBe(expected);
    expect(Number(await admin.get(a.usageKey(org.id, MONTH)))).toBe(expected);
    await expect(a.check(org.id, expected + 1, NOW)).resolves.toBeUndefined();
    await expect(b.check(org.id, expected, NOW)).rejects.toBeInstanceOf(QuotaExceededError);
    expect(await admin.ttl(a.usageKey(org.id, MONTH))).toBeGreaterThan(39 * 24 * 3600);
  });

  it('restores usage from the key store when Redis lost it, and still refuses over quota', async () => {
    const prefix = `${PREFIX}:${seq++}`;
    const store = await keyStore();
    const org = await store.createOrg({ name: 'acme' });
    const quota = new RedisQuotaCounter(await client(), store, { keyPrefix: prefix });
    closers.push(() => quota.close());
    const key = quota.usageKey(org.id, MONTH);

    await quota.add(org.id, batch(100), NOW);
    await expect(quota.check(org.id, 100, NOW)).rejects.toBeInstanceOf(QuotaExceededError);

    // Redis restarted empty.
    await admin.del(key);
    await expect(quota.check(org.id, 100, NOW)).rejects.toBeInstanceOf(QuotaExceededError);
    expect(await admin.get(key)).toBe('100');

    // An add that finds the key gone also starts from the durable total, not from zero.
    await admin.del(key);
    await quota.add(org.id, batch(5), NOW);
    expect(await admin.get(key)).toBe('105');
    await expect(quota.check(org.id, 106, NOW)).resolves.toBeUndefined();

    // Usage the key store already had before Redis ever saw the org (e.g. counted without Redis).
    const other = await store.createOrg({ name: 'globex' });
    await store.addMonthUsage(other.id, MONTH, 50);
    await expect(quota.check(other.id, 50, NOW)).rejects.toBeInstanceOf(QuotaExceededError);
    await expect(quota.check(other.id, 51, NOW)).resolves.toBeUndefined();
  });

  it('keeps two replicas on PostgreSQL exact, also when Redis loses the counter mid-traffic', async () => {
    const prefix = `${PREFIX}:${seq++}`;
    const schema = `${PREFIX}_${seq++}`;
    const db = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    closers.push(async () => {
      await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await db.end();
    });
    const replicas = [0, 1].map(() => new PostgresControlStore(`${DATABASE_URL}?schema=${schema}`, { poolSize: 4 }));
    for (const r of replicas) closers.push(() => r.close());
    await Promise.all(replicas.map((r) => r.start()));
    const org = await replicas[0]!.createOrg({ name: 'acme' });
    const [a, b] = (await Promise.all(replicas.map(async (r) => new RedisQuotaCounter(await client(), r, { keyPrefix: prefix })))) as [
      RedisQuotaCounter,
      RedisQuotaCounter,
    ];
    closers.push(
      () => a.close(),
      () => b.close(),
    );
    const key = a.usageKey(org.id, MONTH);
    const round = async (): Promise<void> => {
      await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? a : b).add(org.id, batch(3), NOW)));
    };

    await round();
    const restart = async (): Promise<void> => {
      await new Promise((r) => setTimeout(r, 2));
      await admin.del(key);
    };
    await Promise.all([round(), restart(), b.check(org.id, 10_000, NOW)]);
    await round();
    expect(await replicas[1]!.getMonthUsage(org.id, MONTH)).toBe(900);
    expect(await admin.get(key)).toBe('900');
    await expect(b.check(org.id, 901, NOW)).resolves.toBeUndefined();
    await expect(a.check(org.id, 900, NOW)).rejects.toBeInstanceOf(QuotaExceededError);
  });

  it('fails closed and fast with 503 when Redis is unreachable', async () => {
    const store = await keyStore();
    const org = await store.createOrg({ name: 'acme' });
    const errors: unknown[] = [];
    const limiter = new RedisRateLimiter('redis://127.0.0.1:1', { keyPrefix: PREFIX });
    const quota = new RedisQuotaCounter('redis://127.0.0.1:1', store, { keyPrefix: PREFIX, onRedisError: (e) => errors.push(e) });
    closers.push(
      () => limiter.close(),
      () => quota.close(),
    );
    const t0 = performance.now();
    const limited = await limiter.consume('k', 10).catch((e: unknown) => e);
    const checked = await quota.check(org.id, 10, NOW).catch((e: unknown) => e);
    expect(performance.now() - t0).toBeLessThan(3000);
    for (const e of [limited, checked]) {
      expect(e).toBeInstanceOf(ServiceUnavailableError);
      expect((e as ServiceUnavailableError).httpCode).toBe(503);
      expect((e as ServiceUnavailableError).headers['Retry-After']).toBe('1');
    }
    // Spans already accepted stay counted in the durable record.
    await quota.add(org.id, batch(3), NOW);
    expect(await store.getMonthUsage(org.id, MONTH)).toBe(3);
    expect(errors).toHaveLength(1);
    // Closing twice is harmless.
    await limiter.close();
    await quota.close();
  });

  it('waits for a reachable Redis and gives up on an unreachable one', async () => {
    const dead = createRedisClient('redis://127.0.0.1:1');
    try {
      await expect(waitForRedis(dead, 300)).rejects.toBeInstanceOf(ServiceUnavailableError);
    } finally {
      dead.disconnect();
    }
    const owned = new RedisRateLimiter(REDIS_URL, { keyPrefix: `${PREFIX}:${seq++}` });
    closers.push(() => owned.close());
    await owned.ready();
    await expect(owned.consume('k', 1)).resolves.toBeUndefined();
    await owned.close();
    await owned.close();
  });
});
