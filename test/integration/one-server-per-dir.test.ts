import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { makeSpan, makeTrace } from '../factories.js';
import { freePort, postTraces, startChildServer } from './support/child-server.js';

const SERVER_BIN = fileURLToPath(new URL('../../packages/server/bin/trace-ingest-server.js', import.meta.url));
const CLI = fileURLToPath(new URL('../../packages/cli/bin/trace-ingest.js', import.meta.url));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The process runs until it exits or `ms` pass (then it is killed): its exit code (null when it was still running) and output. */
async function runFor(cmd: string[], env: Record<string, string>, ms: number): Promise<{ code: number | null; out: string }> {
  const proc = spawn(process.execPath, cmd, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const code = await Promise.race([exited, sleep(ms).then(() => 'running' as const)]);
  if (code === 'running') {
    proc.kill('SIGKILL');
    await exited;
    return { code: null, out };
  }
  return { code, out };
}

/** GET /v1/ping on an admin socket. */
function ping(socketPath: string): Promise<{ status: number; body: { port?: number } }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: '/v1/ping' }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as { port?: number } }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Running (a zombie waiting for a reaper is not). */
const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

const batch = (traceId: string, n: number) => [makeTrace({ traceId, spans: Array.from({ length: n }, (_, i) => makeSpan({ spanId: `s${i}` })) })];

/**
 * One server per DATA_DIR whatever the span store: on ClickHouse nothing
 * else stops a second one, which would replay and retire the first's write
 * log and unlink its admin socket.
 */
describe('one server per DATA_DIR (ClickHouse tier, real processes)', () => {
  const id = randomBytes(4).toString('hex');
  let dir: string;
  let key: string;
  let env: Record<string, string>;
  let spans: ClickHouseSpanStore;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-lock-'));
    env = {
      DATA_DIR: dir,
      CLICKHOUSE_URL: `${inject('clickhouseHttpUrl').replace('http://', 'http://default:@')}/ti_lock_${id}`,
      FLUSH_INTERVAL_MS: '100',
      DRAIN_GRACE_MS: '0',
    };
    spans = new ClickHouseSpanStore({ url: env.CLICKHOUSE_URL as string });
    await spans.start();
    const keys = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'));
    await keys.start();
    await keys.createOrg({ name: 'lock' });
    key = (await keys.createKey({ orgName: 'lock' })).key;
    await keys.close();
  });
  afterAll(async () => {
    await spans.query(`DROP DATABASE IF EXISTS ti_lock_${id}`).catch(() => undefined);
    await spans.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("refuses a second server with one line naming the holder, keeps the first one's socket, and is free again after kill -9", async () => {
    const first = await startChildServer(env);
    onTestFinished(() => {
      first.proc.kill('SIGKILL');
    });
    const firstPort = Number(new URL(first.url).port);
    const walBefore = fs.readdirSync(path.join(dir, 'wal')).sort();

    const second = await runFor([SERVER_BIN], { ...env, HOST: '127.0.0.1', PORT: String(await freePort()), METRICS_PORT: '0', LOG_LEVEL: 'warn' }, 15_000);
    expect(second.code, `the second server kept running: ${second.out}`).toBe(1);
    const lines = second.out.trim().split('\n');
    expect(lines, second.out).toHaveLength(1);
    expect(lines[0]).toContain(`pid ${first.proc.pid}`);
    // It touched nothing of the first's: the write log, and the admin socket the CLI reaches it by.
    expect(fs.readdirSync(path.join(dir, 'wal')).sort()).toEqual(walBefore);
    expect(await ping(path.join(dir, 'admin.sock'))).toMatchObject({ status: 200, body: { port: firstPort } });
    expect((await postTraces(first.url, key, batch('lock-1', 5))).status).toBe(202);

    // kill -9 leaves the pid file behind, not the lock.
    first.proc.kill('SIGKILL');
    await first.exited;
    const doctor = await runFor([CLI, 'doctor', '--json'], { ...env, PORT: '1' }, 60_000);
    const lockCheck = (JSON.parse(doctor.out) as { name: string; status: string; detail: string }[]).find((c) => c.name === 'server lock');
    expect(lockCheck).toMatchObject({ status: 'warn', detail: expect.stringContaining(`pid ${first.proc.pid} `) });
    const restarted = await startChildServer(env);
    onTestFinished(() => {
      restarted.proc.kill('SIGKILL');
    });
    expect(restarted.output()).toContain('did not shut down cleanly');
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'server.pid'), 'utf8'))).toMatchObject({ pid: restarted.proc.pid });
    restarted.proc.kill('SIGTERM');
    expect(await restarted.exited).toBe(0);
    expect(fs.existsSync(path.join(dir, 'server.pid'))).toBe(false);
  });
});

/** `trace-ingest serve` run under a supervisor that kills it with SIGKILL and starts it again. */
describe('trace-ingest serve killed with SIGKILL', () => {
  it('leaves no server behind: the restart finds the port and DATA_DIR free', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-orphan-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const port = await freePort();
    const env = {
      PATH: process.env.PATH ?? '',
      DATA_DIR: dir,
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'warn',
      DRAIN_GRACE_MS: '2000',
    };
    const started: ChildProcess[] = [];
    const serve = async (): Promise<ChildProcess> => {
      const proc = spawn(process.execPath, [CLI, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      started.push(proc);
      let out = '';
      proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
      proc.stderr?.on('data', (c: Buffer) => (out += c.toString()));
      for (let i = 0; ; i++) {
        if (proc.exitCode !== null) throw new Error(`serve exited (${proc.exitCode}): ${out}`);
        if (
          await fetch(`http://127.0.0.1:${port}/readyz`).then(
            (r) => r.ok,
            () => false,
          )
        )
          return proc;
        if (i > 300) throw new Error(`serve did not start: ${out}`);
        await sleep(100);
      }
    };
    const serverPids: number[] = [];
    onTestFinished(() => {
      for (const p of started) p.kill('SIGKILL');
      for (const pid of serverPids) if (alive(pid)) process.kill(pid, 'SIGKILL');
    });

    const wrapper = await serve();
    const child = Number(
      execFileSync('pgrep', ['-P', String(wrapper.pid)])
        .toString()
        .trim(),
    );
    serverPids.push(child);
    expect(alive(child)).toBe(true);
    wrapper.kill('SIGKILL');
    const killedAt = Date.now();
    while (alive(child) && Date.now() - killedAt < 10_000) await sleep(50);
    expect(alive(child), 'the server outlived its wrapper by 10 s').toBe(false);
    // Without the drain grace: gone well within DRAIN_GRACE_MS.
    expect(Date.now() - killedAt).toBeLessThan(2000);

    const again = await serve();
    again.kill('SIGTERM');
    await new Promise((r) => again.once('exit', r));
    expect(again.exitCode).toBe(0);
  });
});
