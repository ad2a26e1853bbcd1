import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { makeSpan, makeTrace } from '../factories.js';
import { freePort } from './support/child-server.js';
import { startClickHouse } from './support/clickhouse-server.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = path.join(ROOT, 'packages/cli/bin/trace-ingest.js');

/**
 * Signals the way terminals and process managers send them: to the whole
 * process group of `npm start` or `trace-ingest serve`. Every process in the
 * group gets the signal, and npm and the CLI forward it to their children as
 * well; the server must still drain exactly once.
 */

interface Launch {
  name: string;
  command: string;
  args: string[];
}

const LAUNCHES: Launch[] = [
  { name: 'npm start', command: 'npm', args: ['start'] },
  { name: 'trace-ingest serve', command: process.execPath, args: [CLI, 'serve'] },
];

interface Group {
  url: string;
  proc: ChildProcess;
  pid: number;
  output: () => string;
  exited: Promise<number | null>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function newDataDir(): Promise<{ dir: string; key: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-signal-'));
  onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  const keys = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'));
  await keys.start();
  await keys.createOrg({ name: 'signals' });
  const key = (await keys.createKey({ orgName: 'signals' })).key;
  await keys.close();
  return { dir, key };
}

/** Starts the launcher as the leader of a new process group, as a shell does for a foreground job. */
async function startGroup(launch: Launch, env: Record<string, string>): Promise<Group> {
  const port = await freePort();
  const proc = spawn(launch.command, launch.args, {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? os.tmpdir(),
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      ...env,
    },
  });
  const pid = proc.pid;
  if (pid === undefined) throw new Error(`${launch.name} did not start`);
  let out = '';
  proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  // Whatever happens in the test, nothing of the group outlives it.
  onTestFinished(async () => {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // the group is gone already
    }
    await exited;
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`${launch.name} exited during start (${proc.exitCode}): ${out}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (i > 600) throw new Error(`${launch.name} did not become ready: ${out}`);
    await sleep(50);
  }
  return { url, proc, pid, output: () => out, exited };
}

function batch(traceId: string, spans: number): string {
  return JSON.stringify({
    version: 'v1',
    traces: [makeTrace({ traceId, spans: Array.from({ length: spans }, (_, i) => makeSpan({ spanId: `${traceId}-s${i}` })) })],
  });
}

function post(url: string, key: string, body: string): Promise<Response> {
  return fetch(`${url}/ingest`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body });
}

/** A request whose body arrives in two halves: the first now, the second when `finish` is called. */
function slowPost(url: string, key: string, body: string): { finish: () => void; status: Promise<number> } {
  const bytes = Buffer.from(body);
  const half = bytes.length >> 1;
  const req = http.request(`${url}/ingest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': String(bytes.length), authorization: `Bearer ${key}` },
  });
  const status = new Promise<number>((resolve, reject) => {
    req.once('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', reject);
  });
  // Awaited by the test; a test that fails before that must not leave it unhandled.
  status.catch(() => undefined);
  req.write(bytes.subarray(0, half));
  return { finish: () => req.end(bytes.subarray(half)), status };
}

async function storedIds(dir: string): Promise<string[]> {
  const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
  await store.start();
  try {
    const rows = await store.query("SELECT trace_id || '/' || span_id AS id FROM spans ORDER BY id");
    return rows.map((r) => r.id as string);
  } finally {
    await store.close();
  }
}

function walFilesWithData(dir: string): string[] {
  const wal = path.join(dir, 'wal');
  return fs.readdirSync(wal).filter((f) => f.endsWith('.wal') && fs.statSync(path.join(wal, f)).size > 0);
}

describe.each(LAUNCHES)('$name: a signal to the whole process group', (launch) => {
  it.each(['SIGTERM', 'SIGINT'] as const)('%s drains once: 503 during the grace, in-flight requests finish, final flush, exit 0', async (signal) => {
    const { dir, key } = await newDataDir();
    // The flush interval is long, so the accepted rows reach the store only through the final flush.
    const g = await startGroup(launch, { DATA_DIR: dir, DRAIN_GRACE_MS: '2500', FLUSH_INTERVAL_MS: '600000' });

    const before = await post(g.url, key, batch('before', 3));
    expect(before.status).toBe(202);
    const inFlight = slowPost(g.url, key, batch('in-flight', 2));
    await sleep(100);

    process.kill(-g.pid, signal);
    await sleep(400);

    const during = await post(g.url, key, batch('during', 1));
    expect(during.status).toBe(503);
    expect(((await during.json()) as { error?: unknown }).error).toEqual(expect.any(String));
    const ready = await fetch(`${g.url}/readyz`);
    expect(ready.status).toBe(503);

    inFlight.finish();
    expect(await inFlight.status).toBe(202);

    expect(await g.exited).toBe(0);
    expect(g.output()).not.toMatch(/second signal/);
    expect(await storedIds(dir)).toEqual(['before/before-s0', 'before/before-s1', 'before/before-s2', 'in-flight/in-flight-s0', 'in-flight/in-flight-s1']);
    expect(walFilesWithData(dir)).toEqual([]);
  });

  it('a deliberate second SIGINT after a pause forces the exit', async () => {
    const { dir, key } = await newDataDir();
    const g = await startGroup(launch, { DATA_DIR: dir, DRAIN_GRACE_MS: '60000', FLUSH_INTERVAL_MS: '600000' });
    expect((await post(g.url, key, batch('kept', 1))).status).toBe(202);

    process.kill(-g.pid, 'SIGINT');
    await sleep(1500);
    // Still draining: the first Ctrl-C alone did not end it.
    expect((await fetch(`${g.url}/readyz`)).status).toBe(503);
    expect(g.proc.exitCode).toBeNull();

    process.kill(-g.pid, 'SIGINT');
    // A drain would take the whole minute of grace and exit 0.
    expect(await g.exited).not.toBe(0);
    expect(g.output()).toMatch(/second signal/);
    // What was accepted stays in the write log for the next start.
    expect(walFilesWithData(dir).length).toBeGreaterThan(0);
  });
});

describe('a signal during a span store outage', () => {
  it('runs the whole shutdown (quota counts written, stores closed) before exiting 0, though the flusher is backing off', async () => {
    const ch = await startClickHouse();
    onTestFinished(() => ch.dispose());
    const { dir, key } = await newDataDir();
    const g = await startGroup(LAUNCHES[1]!, {
      DATA_DIR: dir,
      CLICKHOUSE_URL: ch.urlFor('outage_shutdown'),
      DRAIN_GRACE_MS: '200',
      DRAIN_TIMEOUT_MS: '1500',
      FLUSH_INTERVAL_MS: '100',
      FLUSH_TIMEOUT_MS: '1000',
      LOG_LEVEL: 'info',
    });
    await ch.stop();
    expect((await post(g.url, key, batch('during-outage', 4))).status).toBe(202);
    // The flusher has met the outage and is waiting out its backoff (unref'd timers only).
    for (let i = 0; !/span store insert failed/.test(g.output()); i++) {
      if (i > 200) throw new Error(`the flusher never met the outage: ${g.output()}`);
      await sleep(50);
    }
    process.kill(-g.pid, 'SIGTERM');
    expect(await g.exited).toBe(0);
    expect(g.output()).toMatch(/shutdown complete/);
    // What the store never took stays in the write log for the next start.
    expect(walFilesWithData(dir).length).toBeGreaterThan(0);
    const keys = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'));
    await keys.start();
    onTestFinished(() => keys.close());
    const org = await keys.getOrg('signals');
    expect(await keys.getMonthUsage(org!.id, new Date().toISOString().slice(0, 7))).toBe(4);
  });
});
