import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { encodeLine, payloadToRows, UNPRICED } from '@trace-ingest/shared/rows';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';
import { makeBulkPayload } from '../factories.js';
import { startTestServer } from './support/ingest-server.js';

/**
 * The embedded span store's file, deleted under the running server (an
 * operator cleaning up): the server keeps acknowledged spans in the write
 * log, says why it is not ready, refuses new batches with 503 instead of
 * answering 202 into a file that no longer exists, and takes the file that
 * comes back at the path (restored, or made by `trace-ingest migrate`)
 * without a restart.
 */

const CLI = fileURLToPath(new URL('../../packages/cli/bin/trace-ingest.js', import.meta.url));
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const v = await probe();
    if (v !== undefined) return v;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('the span store file removed while the server runs', () => {
  it('stops acknowledging, says why, keeps what was acknowledged, and resumes on the file that comes back', async () => {
    const t = await startTestServer({ FLUSH_INTERVAL_MS: '50', DRAIN_TIMEOUT_MS: '2000' });
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    expect((await t.post(makeBulkPayload(1, 5), { key })).status).toBe(202);
    await t.server.flush();

    fs.rmSync(t.config.duckdbFile);
    // Acknowledged before the flusher noticed: these wait in the write log.
    const early = await t.post(makeBulkPayload(1, 3), { key });
    expect(early.status).toBe(202);

    const why = await until('readyz to turn not-ready', async () => {
      const r = await fetch(`${t.url}/readyz`);
      return r.status === 503 ? ((await r.json()) as { error: string }).error : undefined;
    });
    expect(why).toMatch(/span store file .* was removed/);
    const refused = await t.post(makeBulkPayload(1, 2), { key });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).not.toBeNull();
    expect(((await refused.json()) as { error: string }).error).toMatch(/trace-ingest migrate/);
    expect(fs.existsSync(t.config.duckdbFile)).toBe(false);
    expect(t.server.writeLog?.rows ?? 0).toBeGreaterThan(0);

    // doctor says so, and does not make a new empty file at the path (which would hide the loss).
    // Not spawnSync: the server runs in this process and must answer doctor's probe meanwhile.
    const doctor = await promisify(execFile)(process.execPath, [CLI, 'doctor', '--json'], {
      env: { PATH: process.env.PATH ?? '', DATA_DIR: t.dir, PORT: new URL(t.url).port },
      encoding: 'utf8',
    }).catch((e: { stdout: string }) => e);
    const checks = JSON.parse(doctor.stdout) as { name: string; status: string; detail: string }[];
    expect(checks.find((c) => c.name === 'span store')).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/missing while a server runs/) as unknown,
    });
    expect(fs.existsSync(t.config.duckdbFile)).toBe(false);

    // An empty store made at the path, as `trace-ingest migrate` does.
    const fresh = new DuckDbSpanStore({ file: t.config.duckdbFile });
    await fresh.start();
    await fresh.close();

    await until('readyz to turn ready again', async () => ((await fetch(`${t.url}/readyz`)).status === 200 ? true : undefined));
    const after = await t.post(makeBulkPayload(1, 4), { key });
    expect([after.status, await after.text()]).toEqual([202, '{"accepted":4}']);
    // The spans acknowledged after the removal are in the new file; none was lost on the way.
    expect(await t.spans('SELECT count(*)::INT AS n FROM spans')).toEqual([{ n: 3 + 4 }]);
  });
});

/** A tmpfs of `mib` MiB, unmounted after the test: a disk that fills up. */
function smallDisk(mib: number): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${mib}m`, 'tmpfs', dir]);
  onTestFinished(() => {
    execFileSync('umount', ['-l', dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Fills the disk of `dir` up to `leaveBytes` free; returns a function that frees it again. */
function fill(dir: string, leaveBytes: number): () => void {
  const st = fs.statfsSync(dir);
  const file = path.join(dir, 'filler');
  fs.writeFileSync(file, Buffer.alloc(Math.max(0, st.bavail * st.bsize - leaveBytes)));
  return () => fs.rmSync(file, { force: true });
}

function rows(tag: string, n: number): { buf: Buffer; n: number } {
  const traces = [
    {
      traceId: tag,
      spans: Array.from({ length: n }, (_, i) => ({
        spanId: `s${i}`,
        spanType: 'llm' as const,
        name: 'x',
        startTime: 1_767_225_600_000 + i,
        endTime: 1_767_225_600_001 + i,
        input: `${tag}-${i}-`.repeat(150),
      })),
    },
  ];
  const r = payloadToRows({ version: 'v1', traces }, { orgId: 'o', keyPrefix: 'k', receivedAt: 1 }, () => UNPRICED);
  return { buf: Buffer.from(r.map((x) => encodeLine(x) + '\n').join('')), n };
}

describe('a full disk', () => {
  it('a checkpoint that hit ENOSPC invalidated the DuckDB file: the store reattaches it by itself once there is room, keeping its rows', async () => {
    const disk = smallDisk(64);
    const store = new DuckDbSpanStore({ file: path.join(disk, 'spans.duckdb') });
    await store.start();
    onTestFinished(() => store.close());
    for (let i = 0; i < 3; i++) {
      const b = rows(`a${i}`, 2000);
      await store.insertLines(b.buf, b.n);
    }
    const free = fill(disk, 64 * 1024);
    await expect(store.query('CHECKPOINT')).rejects.toThrow(/invalidated|No space left/);
    free();
    const b = rows('after', 100);
    // The first statement after the failure may still meet the invalidated file (it reattaches it); the next one works.
    await store.insertLines(b.buf, b.n).catch(() => store.insertLines(b.buf, b.n));
    expect(await store.query('SELECT count(*)::INT AS n FROM spans')).toEqual([{ n: 6100 }]);
  });

  it('refuses batches with 503 (and /readyz says why) under the disk reserve, and accepts them again once there is room', async () => {
    const disk = smallDisk(48);
    const t = await startTestServer({ DISK_RESERVE_BYTES: String(16 * 1024 * 1024), DRAIN_TIMEOUT_MS: '2000' }, {}, disk);
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    expect((await t.post(makeBulkPayload(1, 3), { key })).status).toBe(202);
    const free = fill(disk, 8 * 1024 * 1024);
    await sleep(1100); // the free space is read at most once a second
    const refused = await t.post(makeBulkPayload(1, 3), { key });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: string }).error).toMatch(/disk .* is nearly full/);
    expect((await fetch(`${t.url}/readyz`)).status).toBe(503);
    free();
    await sleep(1100);
    expect((await t.post(makeBulkPayload(1, 3), { key })).status).toBe(202);
    expect(await t.spans('SELECT count(*)::INT AS n FROM spans')).toEqual([{ n: 6 }]);
  });
});

describe('doctor beside a running server', () => {
  it('finds the server through the admin socket whatever port it listens on, and reports the store held by it, not a lock failure', async () => {
    const t = await startTestServer({ DRAIN_TIMEOUT_MS: '2000' });
    onTestFinished(() => t.close());
    await t.newKey();
    const doctor = await promisify(execFile)(process.execPath, [CLI, 'doctor', '--json'], {
      // PORT is not the server's: the socket in DATA_DIR tells where it is.
      env: { PATH: process.env.PATH ?? '', DATA_DIR: t.dir, PORT: '1' },
      encoding: 'utf8',
    }).catch((e: { stdout: string }) => e);
    const checks = JSON.parse(doctor.stdout) as { name: string; status: string; detail: string }[];
    expect(checks.find((c) => c.name === 'server')).toMatchObject({ status: 'ok', detail: `a server answers ready on port ${new URL(t.url).port}` });
    expect(checks.find((c) => c.name === 'span store')?.status).toBe('ok');
  });
});
