import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import type { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { PostgresControlStore } from '@trace-ingest/store/control-store-postgres';
import { makeSpan, makeTrace } from '../factories.js';
import { startChildServer, type ChildServer } from './support/child-server.js';
import { PG_URL, withSchema } from './support/services.js';
import { startReplicaCluster, type ReplicaCluster } from './support/replica-cluster.js';

const CLI = fileURLToPath(new URL('../../packages/cli/bin/trace-ingest.js', import.meta.url));
const run = promisify(execFile);

/**
 * Three real server processes behind no balancer but the test itself, on
 * shared PostgreSQL, Redis and ClickHouse: limits, quota, revocation and
 * spans behave as on one node.
 */
describe('three replicas on PostgreSQL, Redis and ClickHouse', () => {
  let cluster: ReplicaCluster;
  let env: ReplicaCluster['env'];
  let dirs: string[];
  let replicas: ChildServer[] = [];
  let keys: PostgresControlStore;
  let spans: ClickHouseSpanStore;
  const startReplica = (dir: string) => cluster.startReplica(dir);
  const post = (r: ChildServer, key: string, body: unknown) =>
    fetch(`${r.url}/ingest`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
  const batch = (traceId: string, n: number) => ({
    version: 'v1',
    traces: [makeTrace({ traceId, spans: Array.from({ length: n }, (_, i) => makeSpan({ spanId: `s${i}` })) })],
  });

  beforeAll(async () => {
    cluster = await startReplicaCluster('ti_scale', inject('clickhouseHttpUrl'));
    ({ env, dirs, replicas, keys, spans } = cluster);
  });

  afterAll(() => cluster?.dispose());

  it('shares one rate limit per key across replicas', async () => {
    // 2 rps shared by 3 replicas: 15 requests spread over them. Shared, at most 2 pass per 1-second
    // window; a limiter per replica would let up to 6 pass per window (2 on each).
    await keys.createPlan({ name: 'rps2', monthlySpans: 1_000_000, rateLimitRps: 2 });
    await keys.createOrg({ name: 'rate', planName: 'rps2' });
    const { key } = await keys.createKey({ orgName: 'rate' });
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 15 }, (_, i) => post(replicas[i % 3] as ChildServer, key, batch(`rate-${i}`, 1))));
    // Windows start at a key's first request and last one second: a slow burst may span several.
    const windows = Math.floor((performance.now() - started) / 1000) + 1;
    const accepted = answers.filter((r) => r.status === 202).length;
    const limited = answers.filter((r) => r.status === 429);
    expect(accepted + limited.length).toBe(15);
    expect(accepted).toBeGreaterThanOrEqual(2);
    expect(accepted).toBeLessThanOrEqual(2 * windows);
    if (windows === 1) expect(accepted).toBe(2);
    for (const r of limited) expect(r.headers.get('retry-after')).not.toBeNull();
  });

  it('keeps the monthly quota exact across replicas', async () => {
    await keys.createPlan({ name: 'q10', monthlySpans: 10, rateLimitRps: 1000 });
    await keys.createOrg({ name: 'quota', planName: 'q10' });
    const { key } = await keys.createKey({ orgName: 'quota' });
    const statuses: number[] = [];
    for (let i = 0; i < 15; i++) statuses.push((await post(replicas[i % 3] as ChildServer, key, batch(`quota-${i}`, 1))).status);
    expect(statuses.slice(0, 10).every((s) => s === 202)).toBe(true);
    expect(statuses.slice(10).every((s) => s === 429)).toBe(true);
  });

  it('sees a revocation made with the CLI on every replica at once', async () => {
    await keys.createOrg({ name: 'revoke' });
    const created = await keys.createKey({ orgName: 'revoke' });
    for (const r of replicas) expect((await post(r, created.key, batch(`rev-${r.url}`, 1))).status).toBe(202);
    await run(process.execPath, [CLI, 'keys', 'revoke', created.prefix], { env: { PATH: process.env.PATH ?? '', ...env } });
    for (const r of replicas) expect((await post(r, created.key, batch('rev-after', 1))).status).toBe(401);
  });

  it('stores every span once, whichever replica took it, across a kill -9', async () => {
    await keys.createOrg({ name: 'spans' });
    const { key } = await keys.createKey({ orgName: 'spans' });
    const org = await keys.getOrg('spans');
    const acked = new Set<string>();
    let stop = false;
    let n = 0;
    const client = async (slot: number) => {
      while (!stop) {
        const traceId = `load-${++n}`;
        // Every third batch is also re-sent to another replica.
        const targets = n % 3 === 0 ? [slot, (slot + 1) % 3] : [slot];
        for (const t of targets) {
          try {
            const res = await post(replicas[t] as ChildServer, key, batch(traceId, 5));
            if (res.status === 202) for (let i = 0; i < 5; i++) acked.add(`${traceId}/s${i}`);
            await res.body?.cancel();
          } catch {
            // the killed replica
          }
        }
      }
    };
    const load = Promise.all([0, 1, 2].map((s) => client(s)));
    await cluster.killDuringLoad(1, acked, 150, 50, async () => {
      stop = true;
      await load;
    });
    // Drain every replica: SIGTERM flushes its write log, then restart it for the tests after.
    for (let i = 0; i < 3; i++) {
      const r = replicas[i] as ChildServer;
      r.proc.kill('SIGTERM');
      expect(await r.exited).toBe(0);
      replicas[i] = await startReplica(dirs[i] as string);
    }
    const rows = await spans.query(
      "SELECT concat(trace_id, '/', span_id) AS id, count() AS copies FROM spans FINAL WHERE org_id = ? AND trace_id LIKE 'load-%' GROUP BY id",
      [org?.id],
    );
    expect(rows.filter((r) => Number(r.copies) !== 1)).toEqual([]);
    const stored = new Set(rows.map((r) => String(r.id)));
    expect([...acked].filter((x) => !stored.has(x))).toEqual([]);
    expect(acked.size).toBeGreaterThan(100);
  });

  it('records and sends budget alerts from one replica at a time; another takes over when that one is killed', async () => {
    // A cluster of two of its own (every replica of a cluster delivers alerts, and must hold the secrets key).
    const own = {
      ...env,
      DATABASE_URL: withSchema(PG_URL, `${cluster.id}_b`),
      CLICKHOUSE_URL: `${env.CLICKHOUSE_URL}_b`,
      REDIS_KEY_PREFIX: `${env.REDIS_KEY_PREFIX}-b`,
      SECRETS_KEY: randomBytes(32).toString('base64'),
    };
    const ownKeys = new PostgresControlStore(own.DATABASE_URL);
    await ownKeys.start();
    onTestFinished(async () => {
      await ownKeys.close();
      await spans.query(`DROP DATABASE IF EXISTS ${cluster.id}_b`).catch(() => undefined);
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${cluster.id}_b CASCADE`);
      await client.end();
    });
    await ownKeys.createOrg({ name: 'budget' });
    const { key } = await ownKeys.createKey({ orgName: 'budget' });
    const got: { id: string; threshold: number }[] = [];
    const hook = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        got.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; threshold: number });
        res.end();
      });
    });
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
    onTestFinished(() => new Promise<void>((r) => hook.close(() => r())));
    const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
    await run(process.execPath, [CLI, 'budgets', 'set', '--org', 'budget', '--monthly-usd', '1', '--alert-at', '50,100', '--webhook', hookUrl], {
      env: { PATH: process.env.PATH ?? '', ...own },
    });
    // Two replicas of their own, which say when they take up or leave the checks.
    const pair: ChildServer[] = [];
    for (let i = 0; i < 2; i++) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), `ti-budget-${i}-`));
      dirs.push(dir);
      pair.push(await startChildServer({ ...own, DATA_DIR: dir, LOG_LEVEL: 'info', BUDGET_CHECK_MS: '200', WEBHOOK_TIMEOUT_MS: '1000' }));
    }
    onTestFinished(async () => {
      for (const r of pair) if (r.proc.exitCode === null && r.proc.signalCode === null) r.proc.kill('SIGKILL');
      await Promise.all(pair.map((r) => r.exited));
    });
    const holds = (r: ChildServer) => r.output().includes('budget checks: this replica records alerts');
    const recorded = (r: ChildServer) =>
      r
        .output()
        .split('\n')
        .filter((l) => l.includes('budget alert recorded')).length;
    const until = async (what: string, ok: () => boolean, ms = 15_000) => {
      const end = Date.now() + ms;
      while (!ok()) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await until('a replica to hold the budget checks', () => pair.some(holds));
    // Several checks of both later, still one holder.
    await new Promise((r) => setTimeout(r, 1000));
    expect(pair.filter(holds)).toHaveLength(1);
    const holder = pair.find(holds) as ChildServer;
    const other = pair.find((r) => r !== holder) as ChildServer;
    // gpt-4o input at $2.50 per million tokens: $0.60, sent to the replica that does not check.
    const spend = (traceId: string, usd: number) => ({
      version: 'v1',
      traces: [
        makeTrace({
          traceId,
          spans: [
            makeSpan({
              spanId: 's1',
              startTime: Date.now() - 1000,
              endTime: Date.now(),
              provider: 'openai',
              modelId: 'gpt-4o',
              usage: { inputTokens: usd * 400_000 },
            }),
          ],
        }),
      ],
    });
    expect((await post(other, key, spend('budget-1', 0.6))).status).toBe(202);
    await until('the 50% alert', () => got.some((a) => a.threshold === 50));
    await new Promise((r) => setTimeout(r, 1000));
    expect(got.map((a) => a.threshold)).toEqual([50]);
    expect([recorded(holder), recorded(other)]).toEqual([1, 0]);
    // The holder dies: its session, and the lock with it, go; the other replica takes the checks up.
    holder.proc.kill('SIGKILL');
    await holder.exited;
    await until('the other replica to take the checks over', () => holds(other));
    expect((await post(other, key, spend('budget-2', 0.5))).status).toBe(202);
    await until('the 100% alert', () => got.some((a) => a.threshold === 100));
    await new Promise((r) => setTimeout(r, 1000));
    expect(got.map((a) => a.threshold).sort((a, b) => a - b)).toEqual([50, 100]);
    expect(new Set(got.map((a) => a.id)).size).toBe(2);
    expect(recorded(other)).toBe(1);
  }, 90_000);
});
