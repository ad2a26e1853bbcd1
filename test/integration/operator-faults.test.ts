import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { makeSpan, makeTrace } from '../factories.js';
import { postTraces, startChildServerForTest } from './support/child-server.js';

const CLI = fileURLToPath(new URL('../../packages/cli/bin/trace-ingest.js', import.meta.url));
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const batch = (traceId: string, n: number) => [makeTrace({ traceId, spans: Array.from({ length: n }, (_, i) => makeSpan({ spanId: `s${i}` })) })];

interface LogLine {
  level: number;
  msg: string;
  status?: number;
  code?: string;
  err?: { stack?: string };
}
const lines = (out: string): LogLine[] =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);

/** The CLI as an operator runs it on this DATA_DIR: exit code and output. */
async function cli(env: Record<string, string>, args: string[]): Promise<{ code: number; out: string }> {
  return run(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env } }).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
  );
}

describe('what an operator reads on a bad day (real processes)', () => {
  let dir: string;
  let key: string;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-operator-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const keys = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'));
    await keys.start();
    await keys.createOrg({ name: 'ops' });
    key = (await keys.createKey({ orgName: 'ops' })).key;
    await keys.close();
  });

  it('logs 503 refusals once per reason, at warn without a stack, not once per answer', async () => {
    // A reserve larger than any disk: every batch is refused for the same reason (and /readyz says not ready).
    const server = await startChildServerForTest({ DATA_DIR: dir, LOG_LEVEL: 'warn' }, { DISK_RESERVE_BYTES: String(2 ** 52) });
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const res = await postTraces(server.url, key, batch(`refused-${i}`, 2));
      await res.body?.cancel();
      statuses.push(res.status);
    }
    expect(new Set(statuses)).toEqual(new Set([503]));
    const logged = lines(server.output()).filter((l) => l.level >= 40);
    expect(logged.map((l) => l.msg)).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 40, status: 503, code: 'TI_ERR_UNAVAILABLE' });
    expect(logged[0]?.err).toBeUndefined();
  });

  it('takes a client that gives up before its body arrived for what it is: no 500, nothing at error', async () => {
    const server = await startChildServerForTest({ DATA_DIR: dir, MAX_CONCURRENT_BODIES: '1', LOG_LEVEL: 'info' });
    const { hostname, port } = new URL(server.url);
    // A large body holds the one body slot; the second waits for it and hangs up meanwhile.
    const partial = () => {
      const s = net.connect(Number(port), hostname);
      s.write(
        `POST /ingest HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${4 * 1024 * 1024}\r\n\r\n` +
          '{"version":"v1","traces":[',
      );
      s.on('error', () => undefined);
      return s;
    };
    const holder = partial();
    await sleep(300);
    const waiter = partial();
    await sleep(300);
    waiter.destroy();
    await sleep(300);
    holder.destroy();
    await sleep(1000);
    const logged = lines(server.output());
    expect(logged.filter((l) => l.level >= 50 || l.status === 500)).toEqual([]);
    expect(logged.filter((l) => l.msg.includes('closed the connection before its body arrived')).length).toBeGreaterThanOrEqual(2);
    expect((await postTraces(server.url, key, batch('after', 1))).status).toBe(202);
  });

  it('doctor tells a damaged span store file from one another process holds', async () => {
    const env = { DATA_DIR: dir, PORT: '1' };
    expect((await cli(env, ['migrate'])).code).toBe(0);
    const file = path.join(dir, 'spans.duckdb');

    // Held: a process (not a server of this DATA_DIR) keeps the file open.
    const holder = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { DuckDBInstance } = await import(${JSON.stringify(import.meta.resolve('@duckdb/node-api'))}); ` +
          `await DuckDBInstance.create(${JSON.stringify(file)}); process.stdout.write('open\\n'); setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    onTestFinished(() => {
      holder.kill('SIGKILL');
    });
    await new Promise((r) => holder.stdout.once('data', r));
    const held = JSON.parse((await cli(env, ['doctor', '--json'])).out) as { name: string; status: string; detail: string; fix?: string }[];
    expect(held.find((c) => c.name === 'span store')).toMatchObject({ status: 'fail', detail: expect.stringContaining('held by another process') });
    holder.kill('SIGKILL');
    await new Promise((r) => holder.once('exit', r));

    // Damaged: its blocks overwritten.
    const fd = fs.openSync(file, 'r+');
    fs.writeSync(fd, Buffer.alloc(256 * 1024, 0x5a), 0, 256 * 1024, 4096);
    fs.closeSync(fd);
    const damaged = await cli(env, ['doctor', '--json']);
    expect(damaged.code).toBe(1);
    const check = (JSON.parse(damaged.out) as { name: string; status: string; detail: string; fix?: string }[]).find((c) => c.name === 'span store');
    expect(check?.status).toBe('fail');
    expect(check?.detail).toContain('looks damaged');
    expect(check?.fix).not.toMatch(/only one process/);
  });

  it('sql through the admin socket never reads a span store file removed under the server', async () => {
    const server = await startChildServerForTest({ DATA_DIR: dir, FLUSH_INTERVAL_MS: '50' });
    expect((await postTraces(server.url, key, batch('sql-gone', 5))).status).toBe(202);
    const env = { DATA_DIR: dir };
    await sleep(1000);
    expect((await cli(env, ['sql', 'SELECT count(*) AS n FROM spans', '--json'])).out).toContain('"n": "5"');
    fs.rmSync(path.join(dir, 'spans.duckdb'));
    const after = await cli(env, ['sql', 'SELECT count(*) AS n FROM spans', '--json']);
    expect(after.out).not.toContain('"n": "5"');
    expect(after.code).not.toBe(0);
    expect(after.out).toContain('was removed while the server ran');
  });
});
