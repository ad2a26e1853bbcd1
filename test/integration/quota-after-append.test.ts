import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { utcMonth } from '@trace-ingest/shared/ids';
import type { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { makeBulkPayload } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * The quota store fails after the batch is in the write log: another
 * connection holds SQLite's write lock, so reads (key, quota check) work and
 * the usage update gets SQLITE_BUSY. The batch will be stored, so the answer
 * is 202, and the usage catches up once the lock is gone, each span once.
 */

async function server(dir?: string): Promise<TestServer> {
  const t = await startTestServer({}, {}, dir);
  onTestFinished(() => t.close());
  return t;
}

/** A second connection that holds the write lock of the key store until released. */
function lockWrites(file: string): { release: () => void } {
  const db = new Database(file);
  db.pragma('busy_timeout = 0');
  db.exec('BEGIN IMMEDIATE');
  let held = true;
  const release = () => {
    if (!held) return;
    held = false;
    db.exec('ROLLBACK');
    db.close();
  };
  onTestFinished(release);
  return { release };
}

async function usageBecomes(keys: SqliteControlStore, orgId: string, want: number): Promise<number> {
  const month = utcMonth(Date.now());
  let seen = -1;
  for (let i = 0; i < 400; i++) {
    seen = await keys.getMonthUsage(orgId, month);
    if (seen >= want) return seen;
    await new Promise((r) => setTimeout(r, 50));
  }
  return seen;
}

describe('quota accounting that fails after the write-log append', () => {
  it('answers 202, counts the batch once the store takes writes again, and enforces the quota meanwhile', async () => {
    const t = await server();
    await t.keys.createPlan({ name: 'q5', monthlySpans: 5, rateLimitRps: 1000 });
    const { key, orgId } = await t.newKey(undefined, 'q5');
    const month = utcMonth(Date.now());

    const lock = lockWrites(t.config.sqliteFile);
    // No synchronous wait for the lock on the request path: before, each usage update held the event loop for
    // SQLite's 5 s busy timeout, and every request of every org (and /healthz) waited behind it.
    const started = performance.now();
    const first = await t.post(makeBulkPayload(1, 3), { key });
    const health = await fetch(`${t.url}/healthz`);
    expect(performance.now() - started).toBeLessThan(2500);
    expect(health.status).toBe(200);
    expect(first.status).toBe(202);
    expect(await first.json()).toEqual({ accepted: 3 });
    expect(await t.keys.getMonthUsage(orgId, month)).toBe(0);

    // Counted while the store cannot take it: 3 of 5 used, the next batch starts under the quota.
    expect((await t.post(makeBulkPayload(1, 2), { key })).status).toBe(202);
    // 5 of 5 used: refused although the store still says 0.
    const over = await t.post(makeBulkPayload(1, 1), { key });
    expect(over.status).toBe(429);
    expect(((await over.json()) as { error: string }).error).toMatch(/quota of 5 spans/);

    lock.release();
    expect(await usageBecomes(t.keys, orgId, 5)).toBe(5);
    expect(await t.spans('SELECT count(*)::INT AS n FROM spans')).toEqual([{ n: 5 }]);
    // Nothing is counted twice later on.
    await new Promise((r) => setTimeout(r, 500));
    expect(await t.keys.getMonthUsage(orgId, month)).toBe(5);
  });

  it('keeps what is still uncounted at shutdown and counts it on the next start', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-quota-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const t1 = await startTestServer({}, {}, dir);
    const { key, orgId } = await t1.newKey();
    const month = utcMonth(Date.now());
    const lock = lockWrites(t1.config.sqliteFile);
    expect((await t1.post(makeBulkPayload(2, 2), { key })).status).toBe(202);
    await t1.close();
    lock.release();

    const t2 = await server(dir);
    expect(await usageBecomes(t2.keys, orgId, 4)).toBe(4);
    expect(await t2.spans('SELECT count(*)::INT AS n FROM spans')).toEqual([{ n: 4 }]);
    await new Promise((r) => setTimeout(r, 500));
    expect(await t2.keys.getMonthUsage(orgId, month)).toBe(4);
  });
});
