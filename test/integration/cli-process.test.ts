import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { freePort } from './support/child-server.js';

const CLI = fileURLToPath(new URL('../../packages/cli/bin/trace-ingest.js', import.meta.url));
const run = promisify(execFile);

/** The CLI as ops run it: a real process, sharing DATA_DIR with a running server. */
describe('trace-ingest CLI processes', () => {
  let dir: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-cli-proc-'));
    env = {
      PATH: process.env.PATH ?? '',
      DATA_DIR: dir,
      PORT: String(await freePort()),
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DRAIN_GRACE_MS: '100',
    };
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const cli = async (...args: string[]) => run(process.execPath, [CLI, ...args], { env });

  it('prints help', async () => {
    const { stdout } = await cli('--help');
    for (const cmd of ['migrate', 'serve', 'doctor', 'plans', 'orgs', 'keys']) expect(stdout).toContain(cmd);
  });

  it('serves, takes a key created while running, is diagnosed healthy, and drains on SIGTERM', async () => {
    const server = spawn(process.execPath, [CLI, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    server.stdout.on('data', (c: Buffer) => (output += c.toString()));
    server.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
    // The SIGTERM below is what the test is about; this one only runs when an assertion stopped it before.
    onTestFinished(async () => {
      if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
      await exited;
    });
    const url = `http://127.0.0.1:${env.PORT}`;
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${url}/readyz`)).ok) break;
      } catch {
        // not up yet
      }
      if (i > 300) throw new Error(`server did not start: ${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await cli('orgs', 'create', 'live');
    const { stdout } = await cli('keys', 'create', '--org', 'live', '--json');
    const { key } = JSON.parse(stdout) as { key: string };
    const body = JSON.stringify({
      version: 'v1',
      traces: [{ traceId: 't', traceName: 'n', spans: [{ spanId: 's', spanType: 'llm', name: 'x', startTime: 1, endTime: 2 }] }],
    });
    const res = await fetch(`${url}/ingest`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
    expect(res.status).toBe(202);

    const doc = await cli('doctor', '--json');
    const checks = JSON.parse(doc.stdout) as { name: string; status: string }[];
    expect(checks.filter((c) => c.status === 'fail')).toEqual([]);
    expect(checks.find((c) => c.name === 'server')?.status).toBe('ok');

    const { stdout: orgs } = await cli('orgs', 'list', '--json');
    expect(JSON.parse(orgs)).toEqual([expect.objectContaining({ name: 'live', spansThisMonth: 1 })]);

    server.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(output).not.toContain(key);
  });

  it('refuses a bad environment with one clear line', async () => {
    await expect(run(process.execPath, [CLI, 'serve'], { env: { ...env, PORT: 'eighty' } })).rejects.toMatchObject({
      stderr: expect.stringMatching(/PORT/) as unknown,
    });
  });
});
