import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
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
