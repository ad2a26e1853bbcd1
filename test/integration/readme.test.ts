import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startTestServer } from './support/ingest-server.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = path.join(ROOT, 'packages/cli/bin/trace-ingest.js');
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

describe("the README's own path", () => {
  it('runs docker compose with the compose file it names, and that file serves the console to the host', () => {
    const lines = README.split('\n').filter((l) => /docker compose/.test(l));
    expect(lines.length).toBeGreaterThan(2);
    for (const l of lines) expect(l).toMatch(/docker compose -f docker\/docker-compose\.yml/);
    const compose = fs.readFileSync(path.join(ROOT, 'docker/docker-compose.yml'), 'utf8');
    expect(compose).toMatch(/^\s+CONSOLE_PORT: '4001'$/m);
    expect(compose).toMatch(/^\s+CONSOLE_HOST: 0\.0\.0\.0$/m);
    expect(compose).toMatch(/^\s+- '127\.0\.0\.1:4001:4001'$/m);
  });

  it('names only files that exist', () => {
    const named = [
      ...README.matchAll(/(?<![\w/.-])((?:examples|docker|scripts|bench|docs|migrations|packages)\/[\w./-]+\.(?:json|mjs|js|yml|sh|sql|png|ts|md))/g),
    ].map((m) => m[1] ?? '');
    expect(named.length).toBeGreaterThan(5);
    expect(named.filter((f) => !fs.existsSync(path.join(ROOT, f)))).toEqual([]);
  });

  it("sends the quick start batch as written: accepted, and in this month's usage", async () => {
    const t = await startTestServer();
    onTestFinished(() => t.close());
    const { key } = await t.newKey('acme');
    const block = /```sh\n(npx trace-ingest orgs create acme[\s\S]*?)```/.exec(README)?.[1] ?? '';
    const curl = block.slice(block.indexOf('curl ')).split('\n# ')[0] ?? '';
    expect(curl).toMatch(/^curl /);
    const { stdout } = await promisify(execFile)('bash', ['-c', curl.replace('http://localhost:4000', t.url)], { env: { ...process.env, KEY: key } });
    expect(stdout.trim()).toBe('{"accepted":1}');
    const month = new Date().toISOString().slice(0, 7);
    const [row] = await t.spans("SELECT count(*)::INT AS n FROM spans WHERE strftime(start_date, '%Y-%m') = ?", [month]);
    expect(row?.n).toBe(1);
    // It ends with `usage`: the batch's cost, by model, in a table that fits 100 columns.
    const last = block.trim().split('\n').at(-1) ?? '';
    expect(last).toMatch(/^npx trace-ingest usage --org acme(\s|$)/);
    const args = last
      .replace(/\s+#.*$/, '')
      .split(/\s+/)
      .slice(2);
    const { stdout: table } = await promisify(execFile)(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', DATA_DIR: t.dir } });
    expect(table).toMatch(/│ gpt-4o +│ 0\.006 +│ 1 +│/);
    for (const line of table.split('\n')) expect(line.length, line).toBeLessThanOrEqual(100);
  });

  it("sends examples/batch.json as the Docker section does: its span dated by the command's clock, so in that month", async () => {
    const t = await startTestServer();
    onTestFinished(() => t.close());
    const { key } = await t.newKey('default');
    const docker = README.slice(README.indexOf('### Docker'));
    const block = /```sh\n(\. docker\/\.env;[\s\S]*?)```/.exec(docker)?.[1] ?? '';
    const send = block.split('\n# ')[0] ?? '';
    expect(send).toMatch(/examples\/batch\.json/);
    // Run where the README runs it (the repository's root, docker/.env written), on a clock 40 days back.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-readme-docker-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    for (const d of ['docker', 'examples', 'bin']) fs.mkdirSync(path.join(dir, d));
    fs.copyFileSync(path.join(ROOT, 'examples/batch.json'), path.join(dir, 'examples/batch.json'));
    fs.writeFileSync(path.join(dir, 'docker/.env'), `COMPOSE_PROFILES=single\nTRACE_INGEST_INIT_API_KEY=${key}\n`);
    const then = Math.floor(Date.now() / 1000) - 40 * 86_400;
    fs.writeFileSync(path.join(dir, 'bin/date'), `#!/bin/sh\nexec /bin/date -d @${then} "$@"\n`, { mode: 0o755 });
    const { stdout } = await promisify(execFile)('bash', ['-c', send.replaceAll('http://localhost:4000', t.url)], {
      cwd: dir,
      env: { ...process.env, PATH: `${path.join(dir, 'bin')}:${process.env.PATH ?? ''}` },
    });
    expect(stdout.trim()).toBe('{"accepted":1}');
    const rows = await t.spans("SELECT strftime(start_date, '%Y-%m') AS month FROM spans");
    expect(rows).toEqual([{ month: new Date(then * 1000).toISOString().slice(0, 7) }]);
  });

  it('installs the SDK from this repository as it says (npm pack, then npm install of the tarball) and imports it', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-sdk-pack-'));
    const app = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-sdk-app-'));
    onTestFinished(() => {
      fs.rmSync(out, { recursive: true, force: true });
      fs.rmSync(app, { recursive: true, force: true });
    });
    const run = promisify(execFile);
    await run('npm', ['pack', '--workspace=@trace-ingest/sdk', '--pack-destination', out], { cwd: ROOT });
    const [tarball] = fs.readdirSync(out);
    expect(README).toContain(`npm install /tmp/${tarball ?? ''}`);
    fs.writeFileSync(path.join(app, 'package.json'), '{"name":"app","private":true,"type":"module"}');
    await run('npm', ['install', '--no-audit', '--no-fund', path.join(out, tarball ?? '')], { cwd: app });
    const { stdout } = await run(
      process.execPath,
      ['--input-type=module', '-e', "import { TraceIngest } from '@trace-ingest/sdk'; console.log(typeof TraceIngest)"],
      {
        cwd: app,
      },
    );
    expect(stdout.trim()).toBe('function');
  });

  it('console token create prints the console URL of the running server, whatever its port', async () => {
    const t = await startTestServer({ CONSOLE_PORT: '0' });
    onTestFinished(() => t.close());
    const r = await promisify(execFile)(process.execPath, [CLI, 'console', 'token', 'create', '--name', 'finance'], {
      env: { PATH: process.env.PATH ?? '', DATA_DIR: t.dir },
      encoding: 'utf8',
    });
    expect(r.stdout.trim()).toMatch(/^tic_/);
    expect(r.stderr).toContain(`http://127.0.0.1:${t.server.consolePort}/console/`);
  });
});
