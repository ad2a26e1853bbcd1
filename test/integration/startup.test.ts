import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makeSpan, makeTrace } from '../factories.js';
import { freePort, postTraces, startChildServerForTest } from './support/child-server.js';

const SERVER_BIN = fileURLToPath(new URL('../../packages/server/bin/trace-ingest-server.js', import.meta.url));
const KEY = `ti_${'k'.repeat(43)}`;

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-startup-'));
  onTestFinished(() => {
    fs.chmodSync(dir, 0o700);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/**
 * Runs the server binary with DATA_DIR under `dir` made unwritable: by its mode for a user, and (root
 * writes through modes) by a read-only mount over it in a mount namespace of its own for root.
 */
function startOnUnwritable(dir: string, dataDir: string): Promise<{ code: number | null; out: string }> {
  const env = { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATA_DIR: dataDir };
  const root = process.getuid?.() === 0;
  if (!root) fs.chmodSync(dir, 0o555);
  return freePort().then(
    (port) =>
      new Promise((resolve) => {
        const proc = root
          ? spawn('unshare', ['-m', 'sh', '-c', 'mount -t tmpfs -o ro none "$0" && exec "$@"', dir, process.execPath, SERVER_BIN], {
              env: { ...env, PORT: String(port) },
              stdio: ['ignore', 'pipe', 'pipe'],
            })
          : spawn(process.execPath, [SERVER_BIN], { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
        proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
        proc.once('exit', (code) => resolve({ code, out }));
      }),
  );
}

describe('start-up errors', () => {
  it('puts TRACE_INGEST_INIT_API_KEY without TRACE_INGEST_INIT_ORG in the org named default', async () => {
    const t = await startChildServerForTest({ DATA_DIR: tempDir(), TRACE_INGEST_INIT_API_KEY: KEY, LOG_LEVEL: 'info' });
    const res = await postTraces(t.url, KEY, [makeTrace({ spans: [makeSpan()] })]);
    expect(res.status).toBe(202);
    expect(t.output()).toMatch(/"org":"default".*created the initial API key/);
  });

  it.each([
    ['DATA_DIR itself', (dir: string) => dir],
    ['a DATA_DIR to be made inside it', (dir: string) => path.join(dir, 'nested', 'data')],
  ])('refuses an unwritable directory (%s) in one line naming it and the uid, exit 1, nothing drained', async (_name, dataDirOf) => {
    const dir = tempDir();
    const { code, out } = await startOnUnwritable(dir, dataDirOf(dir));
    expect(code).toBe(1);
    const lines = out.trim().split('\n');
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0] ?? '') as { level: number; msg: string; code?: string; err?: unknown };
    expect(line.msg).toContain(`DATA_DIR ${dir} is not writable by uid ${process.getuid?.()}`);
    expect(line.msg).toContain(`chown -R ${process.getuid?.()}:`);
    expect(line).toMatchObject({ level: 60, code: 'TI_ERR_CONFIG' });
    expect(line.err).toBeUndefined();
    expect(out).not.toMatch(/draining/);
  });
});
