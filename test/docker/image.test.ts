import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../integration/support/child-server.js';
import { startClickHouse } from '../integration/support/clickhouse-server.js';

/**
 * The image as an operator runs it, against the dockerd of DOCKER_HOST (CI's
 * own: scripts/docker-ci.sh builds TI_IMAGE and runs this file with
 * test/docker/vitest.config.ts, apart from `npm test`). Sequential: each step
 * uses what the one before left (the volume, the keys). Every container and
 * volume is labelled and removed at the end.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const IMAGE = process.env.TI_IMAGE ?? 'trace-ingest:ci';
const RUN = `ti-smoke-${randomBytes(4).toString('hex')}`;
const VOLUME = `${RUN}-data`;
const LABEL = 'trace-ingest.smoke';
const STOP_TIMEOUT_S = 60;
const INIT_KEY = `ti_${'i'.repeat(43)}`;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Result> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, timeout: opts.timeoutMs ?? 120_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

async function docker(...args: string[]): Promise<Result> {
  return run('docker', args);
}

async function dockerOk(...args: string[]): Promise<string> {
  const r = await docker(...args);
  assert.equal(r.code, 0, `docker ${args.join(' ')} failed (${r.code}): ${r.stderr}${r.stdout}`);
  return r.stdout.trim();
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** `docker run -d` of the image, labelled for the clean-up, on this volume. */
async function runImage(name: string, volume: string, args: string[]): Promise<void> {
  await dockerOk('run', '-d', '--name', name, '--label', LABEL, '-v', `${volume}:/data`, ...args, IMAGE);
}

async function startServer(name: string, extra: string[] = []): Promise<string> {
  await runImage(name, VOLUME, ['-p', '127.0.0.1::4000', '--stop-timeout', String(STOP_TIMEOUT_S), ...extra]);
  const port = (await dockerOk('port', name, '4000/tcp')).split('\n')[0]?.split(':').pop() ?? '';
  return `http://127.0.0.1:${port}`;
}

/** The HEALTHCHECK's verdict (interval 10 s, start period 20 s); fails fast when the container exits. */
async function waitHealthy(name: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const state = await dockerOk('inspect', '-f', '{{.State.Status}} {{.State.Health.Status}}', name);
    if (state === 'running healthy') return;
    if (!state.startsWith('running')) assert.fail(`${name} is ${state}: ${(await docker('logs', name)).stdout}`);
    if (Date.now() > deadline) assert.fail(`${name} did not become healthy (${state})`);
    await sleep(500);
  }
}

function batch(spanId: string): string {
  const now = Date.now();
  return JSON.stringify({
    version: 'v1',
    traces: [
      {
        traceId: `trace-${spanId}`,
        traceName: 'chat',
        spans: [
          {
            spanId,
            spanType: 'llm',
            name: 'completion',
            startTime: now,
            endTime: now + 500,
            provider: 'openai',
            modelId: 'gpt-4o',
            usage: { inputTokens: 100, outputTokens: 10 },
          },
        ],
      },
    ],
  });
}

async function totalSpans(name: string): Promise<number> {
  const out = await dockerOk('exec', name, 'trace-ingest', 'usage', '--org', 'default', '--json');
  return (JSON.parse(out) as { total: { spans: number } }).total.spans;
}

afterAll(async () => {
  const ids = (await docker('ps', '-aq', '--filter', `label=${LABEL}`)).stdout.trim();
  if (ids !== '') await docker('rm', '-f', ...ids.split('\n'));
  for (const v of [VOLUME, `${VOLUME}-1`, `${VOLUME}-2`]) await docker('volume', 'rm', '-f', v);
});

let url = '';
let key = '';
let accepted = 0;

describe('the image on one node', () => {
  it('starts on a named volume with the init key in org default, and its HEALTHCHECK reaches healthy', async () => {
    url = await startServer(`${RUN}-a`, ['-e', `TRACE_INGEST_INIT_API_KEY=${INIT_KEY}`]);
    await waitHealthy(`${RUN}-a`);
    const res = await fetch(`${url}/ingest`, {
      method: 'POST',
      headers: { authorization: `Bearer ${INIT_KEY}`, 'content-type': 'application/json' },
      body: batch('init-key'),
    });
    assert.equal(res.status, 202, await res.text());
    accepted++;
  });

  it('creates a key with the CLI through docker exec', async () => {
    key = await dockerOk('exec', `${RUN}-a`, 'trace-ingest', 'keys', 'create', '--org', 'default');
    assert.match(key, /^ti_[A-Za-z0-9_-]{43}$/);
  });

  it("takes the README's Docker batch on the published port, and usage shows it", async () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const docker = readme.slice(readme.indexOf('### Docker'));
    const block = /```sh\n(\. docker\/\.env;[\s\S]*?)```/.exec(docker)?.[1] ?? '';
    const send = block.split('\n# ')[0] ?? '';
    assert.match(send, /examples\/batch\.json/);
    const usage = /docker compose -f docker\/docker-compose\.yml exec server (trace-ingest usage [^\n]*)/.exec(block)?.[1] ?? '';
    assert.match(usage, /^trace-ingest usage --org default$/);
    // The README runs from the repository's root with docker/.env written: here a scratch copy of that.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-smoke-readme-'));
    try {
      fs.mkdirSync(path.join(dir, 'docker'));
      fs.mkdirSync(path.join(dir, 'examples'));
      fs.copyFileSync(path.join(ROOT, 'examples/batch.json'), path.join(dir, 'examples/batch.json'));
      fs.writeFileSync(path.join(dir, 'docker/.env'), `COMPOSE_PROFILES=single\nTRACE_INGEST_INIT_API_KEY=${key}\n`);
      const r = await run('bash', ['-c', send.replaceAll('http://localhost:4000', url)], { cwd: dir });
      assert.equal(r.stdout.trim(), '{"accepted":1}', r.stderr);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    accepted++;
    const shown = await dockerOk('exec', `${RUN}-a`, ...usage.split(' '));
    assert.match(shown, /gpt-4o/);
    assert.match(shown, new RegExp(`spans that started ${new Date().toISOString().slice(0, 7)}-01`));
    assert.equal(await totalSpans(`${RUN}-a`), accepted);
  });

  it('drains on docker stop within the stop timeout: 503 draining meanwhile, exit 0, nothing accepted is lost', async () => {
    let stopping = false;
    const unexpected: string[] = [];
    let draining = 0;
    const post = async (i: number): Promise<'202' | '503' | 'gone' | string> => {
      try {
        const res = await fetch(`${url}/ingest`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: batch(`drain-${i}`),
          signal: AbortSignal.timeout(10_000),
        });
        const body = await res.text();
        if (res.status === 503 && body.includes('TI_ERR_DRAINING')) return '503';
        return String(res.status);
      } catch {
        return 'gone';
      }
    };
    // Batches keep coming while the container stops, as from a client that does not know.
    const sender = (async () => {
      for (let i = 0; ; i++) {
        const r = await post(i);
        if (r === '202') accepted++;
        else if (r === '503') draining++;
        else if (r === 'gone' && stopping) return;
        else if (r !== 'gone') unexpected.push(r);
        await sleep(50);
      }
    })();
    await sleep(1000);
    stopping = true;
    const t0 = Date.now();
    await dockerOk('stop', `${RUN}-a`);
    const stopMs = Date.now() - t0;
    await sender;
    assert.deepEqual(unexpected, []);
    assert.ok(stopMs < STOP_TIMEOUT_S * 1000, `docker stop took ${stopMs} ms`);
    assert.equal(await dockerOk('inspect', '-f', '{{.State.ExitCode}}', `${RUN}-a`), '0');
    const logs = await docker('logs', `${RUN}-a`);
    assert.match(logs.stdout, /draining: new batches get 503/);
    assert.match(logs.stdout, /shutdown complete/);
    assert.ok(draining > 0, 'no batch was answered 503 TI_ERR_DRAINING during the drain');
  });

  it('keeps the data in a new container on the same volume', async () => {
    await dockerOk('rm', `${RUN}-a`);
    await startServer(`${RUN}-b`);
    await waitHealthy(`${RUN}-b`);
    assert.equal(await totalSpans(`${RUN}-b`), accepted);
    const keys = await dockerOk('exec', `${RUN}-b`, 'trace-ingest', 'keys', 'list', '--org', 'default');
    assert.match(keys, new RegExp(key.slice(0, 11)));
  });

  it('refuses a root-owned bind mount in one line naming /data and uid 1000, exit 1', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-smoke-bind-'));
    try {
      fs.chmodSync(dir, 0o755);
      await docker('run', '--name', `${RUN}-bind`, '--label', LABEL, '-v', `${dir}:/data`, IMAGE);
      assert.equal(await dockerOk('inspect', '-f', '{{.State.ExitCode}}', `${RUN}-bind`), '1');
      // What the container printed (the docker client adds its own warnings on this machine).
      const r = await docker('logs', `${RUN}-bind`);
      const lines = (r.stdout + r.stderr).trim().split('\n');
      assert.equal(lines.length, 1, lines.join('\n'));
      assert.match(lines[0] ?? '', /DATA_DIR \/data is not writable by uid 1000 \(EACCES\): chown -R 1000:1000 it/);
      assert.deepEqual(fs.readdirSync(dir), []);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * The compose file's scale-out replicas as `docker run` containers: their
 * environment read from docker/docker-compose.yml (interpolated from a
 * docker/.env like the README's), with only the addresses changed to this
 * machine's servers (host network: a PostgreSQL schema, a Redis key prefix
 * and a ClickHouse of this run, its password full of URL characters).
 */
describe("the compose file's scale-out replicas", () => {
  const id = randomBytes(4).toString('hex');
  const PG_URL = process.env.TI_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const REDIS_URL = process.env.TI_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const PASSWORD = 'p@ss:w/rd#%41';
  const dotEnv: Record<string, string> = { TRACE_INGEST_INIT_API_KEY: INIT_KEY, CLICKHOUSE_PASSWORD: PASSWORD, POSTGRES_PASSWORD: PASSWORD };
  const schema = `ti_smoke_${id}`;
  const urls: string[] = [];

  afterAll(async () => {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`ti-smoke-${id}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  function replicaEnv(service: string): Record<string, string> {
    const text = fs.readFileSync(path.join(ROOT, 'docker/docker-compose.yml'), 'utf8');
    const doc = parse(text, { merge: true }) as { services: Record<string, { environment: Record<string, string> }> };
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(doc.services[service]?.environment ?? {})) {
      env[k] = String(v).replace(/\$\{(\w+)(?::?[-?][^}]*)?\}/g, (all, name: string) => dotEnv[name] ?? /:-([^}]*)\}$/.exec(all)?.[1] ?? '');
    }
    return env;
  }

  it('start from the compose environment; the CLI in replica-1 creates a key that replica-2 takes; spans reach ClickHouse', async () => {
    const ch = await startClickHouse({ password: PASSWORD });
    try {
      for (const [n, service] of [
        [1, 'replica-1'],
        [2, 'replica-2'],
      ] as const) {
        const env = replicaEnv(service);
        assert.equal(env.CLICKHOUSE_PASSWORD, PASSWORD);
        assert.match(env.DATABASE_URL ?? '', /^postgres:\/\/trace@postgres:5432\//);
        const port = await freePort();
        const here = new URL(PG_URL);
        here.searchParams.set('schema', schema);
        Object.assign(env, {
          HOST: '127.0.0.1',
          PORT: String(port),
          CONSOLE_HOST: '127.0.0.1',
          CONSOLE_PORT: String(await freePort()),
          // /metrics on the container's loopback: on the host's network each replica needs its own port.
          METRICS_PORT: String(await freePort()),
          CLICKHOUSE_URL: env.CLICKHOUSE_URL?.replace('trace@clickhouse:8123', `default@127.0.0.1:${ch.httpPort}`).replace(/\/trace_ingest$/, `/${schema}`),
          DATABASE_URL: here.toString(),
          REDIS_URL,
          REDIS_KEY_PREFIX: `ti-smoke-${id}`,
        });
        const name = `${RUN}-replica-${n}`;
        await runImage(name, `${VOLUME}-${n}`, ['--network', 'host', ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`])]);
        urls.push(`http://127.0.0.1:${port}`);
        await waitHealthy(name);
      }
      const created = await dockerOk('exec', `${RUN}-replica-1`, 'trace-ingest', 'keys', 'create', '--org', 'default');
      for (const [i, [url, k]] of [
        [urls[1], created],
        [urls[0], INIT_KEY],
      ].entries()) {
        const res = await fetch(`${url ?? ''}/ingest`, {
          method: 'POST',
          headers: { authorization: `Bearer ${k ?? ''}`, 'content-type': 'application/json' },
          body: batch(`replica-${i}`),
        });
        assert.equal(res.status, 202, await res.text());
      }
      let spans = 0;
      for (let i = 0; i < 60 && spans < 2; i++) {
        spans = Number(JSON.parse(await dockerOk('exec', `${RUN}-replica-2`, 'trace-ingest', 'usage', '--org', 'default', '--json')).total.spans);
        if (spans < 2) await sleep(500);
      }
      assert.equal(spans, 2);
    } finally {
      for (const n of [1, 2]) await docker('rm', '-f', `${RUN}-replica-${n}`);
      await ch.dispose();
    }
  });
});
