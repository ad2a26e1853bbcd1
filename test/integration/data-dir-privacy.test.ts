import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makePayload } from '../factories.js';
import { startChildServer } from './support/child-server.js';

/**
 * DATA_DIR is the server user's alone: the real server binary (its umask),
 * a DATA_DIR it creates, then the mode of every folder and file it and the
 * CLI made, what another local user can read, and what doctor says.
 */

const CLI = fileURLToPath(new URL('../../packages/cli/bin/trace-ingest.js', import.meta.url));
const run = promisify(execFile);

/** Every path under `dir` with its permission bits. */
function modes(dir: string): Record<string, number> {
  const out: Record<string, number> = { '.': fs.statSync(dir).mode & 0o777 };
  for (const e of fs.readdirSync(dir, { recursive: true, encoding: 'utf8' })) out[e] = fs.lstatSync(path.join(dir, e)).mode & 0o777;
  return out;
}

describe('DATA_DIR private', () => {
  it('is made 0700 with every file 0600 by the server and the CLI; another user reads nothing; doctor says so', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-private-'));
    onTestFinished(() => fs.rmSync(parent, { recursive: true, force: true }));
    fs.chmodSync(parent, 0o755);
    const dir = path.join(parent, 'data');
    const env = { PATH: process.env.PATH ?? '', DATA_DIR: dir };
    const cli = (...args: string[]) => run(process.execPath, [CLI, ...args], { env, encoding: 'utf8' });
    const server = await startChildServer({ DATA_DIR: dir, FLUSH_INTERVAL_MS: '50' });
    onTestFinished(async () => {
      server.proc.kill('SIGTERM');
      await server.exited;
    });
    await cli('orgs', 'create', 'acme');
    const key = (await cli('keys', 'create', '--org', 'acme')).stdout.trim();
    await cli('budgets', 'set', '--org', 'acme', '--monthly-usd', '5', '--webhook', 'http://127.0.0.1:9/hook');
    const res = await fetch(`${server.url}/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify(makePayload()),
    });
    expect(res.status).toBe(202);
    await new Promise((r) => setTimeout(r, 500));
    await cli('export', '--org', 'acme', '--format', 'csv', '--out', path.join(dir, 'export.csv'));

    const m = modes(dir);
    for (const p of ['trace-ingest.sqlite', 'spans.duckdb', 'secrets.key', 'admin.sock', 'export.csv']) expect(m[p], p).toBeDefined();
    expect(Object.keys(m).some((p) => p.startsWith('wal/') && p.endsWith('.wal'))).toBe(true);
    const open = Object.entries(m).filter(([, mode]) => (mode & 0o077) !== 0);
    expect(open).toEqual([]);
    expect(m['.']).toBe(0o700);

    // Another local user (nobody) reads neither the key store nor the span store, when this machine can run as one.
    if (process.getuid?.() === 0) {
      for (const f of ['trace-ingest.sqlite', 'spans.duckdb', 'secrets.key']) {
        const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'cat', path.join(dir, f)], { encoding: 'utf8' });
        expect(r.status, f).not.toBe(0);
        expect(r.stderr).toMatch(/Permission denied/);
      }
    }

    const doctor = JSON.parse((await cli('doctor', '--json')).stdout) as { name: string; status: string; detail: string; fix?: string }[];
    expect(doctor.find((c) => c.name === 'data dir privacy')).toMatchObject({ status: 'ok', detail: expect.stringContaining('private') });
    fs.chmodSync(dir, 0o755);
    fs.chmodSync(path.join(dir, 'spans.duckdb'), 0o644);
    const after = JSON.parse((await cli('doctor', '--json').catch((e: { stdout: string }) => e)).stdout) as {
      name: string;
      status: string;
      detail: string;
      fix?: string;
    }[];
    expect(after.find((c) => c.name === 'data dir privacy')).toMatchObject({
      status: 'warn',
      detail: expect.stringMatching(/rwxr-xr-x.*spans\.duckdb rw-r--r--/),
      fix: `chmod -R go-rwx ${dir}`,
    });
  });
});
