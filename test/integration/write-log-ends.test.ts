import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { makeSpan, makeTrace } from '../factories.js';
import { postTraces, startChildServer } from './support/child-server.js';
import { startClickHouse, type ClickHouseTestServer } from './support/clickhouse-server.js';

const CLI = fileURLToPath(new URL('../../packages/cli/bin/trace-ingest.js', import.meta.url));
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const batch = (traceId: string, n: number) => [makeTrace({ traceId, spans: Array.from({ length: n }, (_, i) => makeSpan({ spanId: `s${i}` })) })];

/**
 * The write log knows its first and last segment: with the span store down,
 * 1,000 acknowledged spans wait in two segments (50, then 950); removing
 * either one, which leaves no gap in the numbers, is logged with its spans,
 * counted and failed by doctor.
 */
describe('a write-log segment removed at either end (ClickHouse down, real processes)', () => {
  let ch: ClickHouseTestServer;
  let dir: string;
  let key: string;
  const walCopy = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-wal-copy-'));
  const base = { FLUSH_INTERVAL_MS: '100', FLUSH_TIMEOUT_MS: '1000', DRAIN_GRACE_MS: '0', DRAIN_TIMEOUT_MS: '300' };

  beforeAll(async () => {
    ch = await startClickHouse();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-wal-ends-'));
    const keys = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'));
    await keys.start();
    await keys.createOrg({ name: 'ends' });
    key = (await keys.createKey({ orgName: 'ends' })).key;
    await keys.close();

    // 50 spans sealed in the first segment while the store is down, 950 in the second, left at a clean stop.
    const server = await startChildServer({ ...base, DATA_DIR: dir, CLICKHOUSE_URL: ch.urlFor('ti_ends_setup') });
    try {
      await ch.stop();
      expect((await postTraces(server.url, key, batch('ends-first', 50))).status).toBe(202);
      await sleep(500);
      for (let i = 0; i < 19; i++) expect((await postTraces(server.url, key, batch(`ends-last-${i}`, 50))).status).toBe(202);
      server.proc.kill('SIGTERM');
      await server.exited;
    } finally {
      server.proc.kill('SIGKILL');
    }
    await ch.start();
    fs.cpSync(path.join(dir, 'wal'), walCopy, { recursive: true });
  }, 120_000);
  afterAll(async () => {
    await ch?.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(walCopy, { recursive: true, force: true });
  });

  const segments = () =>
    fs
      .readdirSync(path.join(dir, 'wal'))
      .filter((f) => f.endsWith('.wal'))
      .sort();

  /** The write log as left by the setup, with the segment at `end` removed; then doctor, a restart, and what is stored. */
  async function removeAndRestart(end: 'first' | 'last', database: string) {
    fs.rmSync(path.join(dir, 'wal'), { recursive: true, force: true });
    fs.cpSync(walCopy, path.join(dir, 'wal'), { recursive: true });
    const segs = segments();
    expect(segs).toHaveLength(2);
    fs.rmSync(path.join(dir, 'wal', end === 'first' ? segs[0]! : segs[1]!));

    const env = { ...base, DATA_DIR: dir, CLICKHOUSE_URL: ch.urlFor(database) };
    const doctor = await run(process.execPath, [CLI, 'doctor', '--json'], { env: { PATH: process.env.PATH ?? '', ...env, PORT: '1' } }).then(
      (r) => ({ code: 0, out: r.stdout }),
      (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
    );
    const checks = JSON.parse(doctor.out) as { name: string; status: string; detail: string }[];
    const walCheck = checks.find((c) => c.name === 'write log');

    const server = await startChildServer({ ...env, LOG_LEVEL: 'info' });
    onTestFinished(() => {
      server.proc.kill('SIGKILL');
    });
    const metricsPort = (/"port":(\d+),"host":"127.0.0.1","token":\w+,"msg":"metrics listening/.exec(server.output()) ?? [])[1];
    const spans = new ClickHouseSpanStore({ url: ch.urlFor(database) });
    await spans.start();
    onTestFinished(() => spans.close());
    let stored = 0;
    for (let i = 0; i < 100; i++) {
      stored = Number((await spans.query("SELECT count() AS n FROM spans WHERE trace_id LIKE 'ends-%'"))[0]?.n ?? 0);
      if (stored >= (end === 'first' ? 950 : 50)) break;
      await sleep(100);
    }
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const missingMetric = Number(/^trace_ingest_wal_missing_segments_total (\d+)/m.exec(metrics)?.[1]);
    const missingLine = server
      .output()
      .split('\n')
      .find((l) => l.includes('write log segments the checkpoint expects are missing'));
    return { doctor: { code: doctor.code, walCheck }, stored, missingMetric, missingLine };
  }

  it('the newest removed: 950 spans logged, counted and failed by doctor', async () => {
    const r = await removeAndRestart('last', 'ti_ends_last');
    expect(r.stored).toBe(50);
    expect(r.doctor.code).toBe(1);
    expect(r.doctor.walCheck).toMatchObject({ status: 'fail' });
    expect(r.doctor.walCheck?.detail).toContain('(last, 950 spans)');
    expect(r.missingMetric).toBe(1);
    expect(r.missingLine).toBeDefined();
    expect(JSON.parse(r.missingLine!)).toMatchObject({ level: 50, count: 1, spans: 950 });
  });

  it('the oldest removed: 50 spans logged, counted and failed by doctor', async () => {
    const r = await removeAndRestart('first', 'ti_ends_first');
    expect(r.stored).toBe(950);
    expect(r.doctor.code).toBe(1);
    expect(r.doctor.walCheck?.detail).toContain('(first, 50 spans)');
    expect(r.missingMetric).toBe(1);
    expect(JSON.parse(r.missingLine!)).toMatchObject({ level: 50, count: 1, spans: 50 });
  });
});
