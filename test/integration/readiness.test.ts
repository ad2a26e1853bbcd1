import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { makeBulkPayload } from '../factories.js';
import { freePort, startChildServerForTest } from './support/child-server.js';
import { timedFetch, timedIngest } from './support/timed.js';

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-ready-'));
  onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function keyIn(dir: string): Promise<string> {
  const keys = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'));
  await keys.start();
  await keys.createOrg({ name: 'acme' });
  const { key } = await keys.createKey({ orgName: 'acme' });
  await keys.close();
  return key;
}

/** A Redis of the test's own on a free port, stopped by the test. */
async function startRedis(port: number): Promise<ChildProcess> {
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  onTestFinished(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('Ready to accept connections')) resolve();
    });
    proc.once('exit', (code) => reject(new Error(`redis-server exited ${code}: ${out}`)));
  });
  return proc;
}

async function readyzUntil(url: string, status: number): Promise<{ status: number; body: Record<string, unknown> }> {
  let last = await timedFetch(`${url}/readyz`);
  for (let i = 0; i < 60 && last.status !== status; i++) {
    await new Promise((r) => setTimeout(r, 100));
    last = await timedFetch(`${url}/readyz`);
  }
  return last;
}

/** /readyz covers every dependency the request path needs, and says which one is down. */
describe('/readyz', () => {
  it('is not ready while Redis is down, names it, and is ready again when it is back', async () => {
    const dir = tempDir();
    const key = await keyIn(dir);
    const port = await freePort();
    const redis = await startRedis(port);
    const server = await startChildServerForTest({ DATA_DIR: dir, REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: 'ti-ready' });
    expect((await timedIngest(server.url, key, makeBulkPayload(1, 1))).status).toBe(202);

    redis.kill('SIGTERM');
    await new Promise((r) => redis.once('exit', r));
    const ingest = await timedIngest(server.url, key, makeBulkPayload(1, 1));
    expect(ingest.status).toBe(503);
    const probes = await Promise.all(Array.from({ length: 5 }, () => timedFetch(`${server.url}/readyz`)));
    for (const p of probes) {
      expect(p.status).toBe(503);
      expect(p.ms).toBeLessThan(2500);
      expect((p.body.checks as Record<string, string>).redis).toMatch(/Redis is not connected|connect/i);
      expect((p.body.checks as Record<string, string>)['control store']).toBe('ok');
    }

    await startRedis(port);
    expect((await readyzUntil(server.url, 200)).status).toBe(200);
    expect((await timedIngest(server.url, key, makeBulkPayload(1, 1))).status).toBe(202);
  }, 60_000);

  it('is not ready while the process has no file handle left for the flusher', async () => {
    const dir = tempDir();
    const key = await keyIn(dir);
    const server = await startChildServerForTest({ DATA_DIR: dir, FLUSH_INTERVAL_MS: '100' });
    expect((await timedIngest(server.url, key, makeBulkPayload(1, 1))).status).toBe(202);
    expect((await timedFetch(`${server.url}/readyz`)).status).toBe(200);

    // One file handle left: the soft limit is one above the lowest free descriptor number (the kernel hands out the lowest).
    const pid = String(server.proc.pid);
    const used = new Set(fs.readdirSync(`/proc/${pid}/fd`).map(Number));
    let free = 0;
    while (used.has(free)) free++;
    execFileSync('prlimit', ['--pid', pid, `--nofile=${free + 1}:`]);
    // The batch reaches the write log's open segment; its flush needs a handle more.
    expect((await timedIngest(server.url, key, makeBulkPayload(1, 1))).status).toBe(202);
    const notReady = await readyzUntil(server.url, 503);
    expect(notReady.status).toBe(503);
    expect((notReady.body.checks as Record<string, string>)['file handles']).toMatch(/file handles left|EMFILE/);

    execFileSync('prlimit', ['--pid', pid, '--nofile=4096:']);
    expect((await readyzUntil(server.url, 200)).status).toBe(200);
  }, 60_000);
});
