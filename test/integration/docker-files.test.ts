import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '@trace-ingest/shared/config';

/**
 * The Docker files read as Compose v2 and the image read them, without a
 * Compose binary: the compose file parsed (anchors and merge keys resolved),
 * its variables interpolated from the docker/.env that the README's Docker
 * section writes, and each stack checked for what the README promises. CI's
 * Docker step (scripts/docker-ci.sh) then runs the app's containers for real.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (f: string) => fs.readFileSync(path.join(ROOT, f), 'utf8');
const README = read('README.md');
const COMPOSE_TEXT = read('docker/docker-compose.yml');
const NGINX = read('docker/nginx.conf');

interface Service {
  profiles?: string[];
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  build?: { context: string; dockerfile: string };
}
interface Compose {
  name?: string;
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

/** Compose's interpolation: ${V}, ${V:-d}, ${V-d}, ${V:?e}, ${V?e}, $$. */
function interpolate(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}/g, (all, name?: string, colon?: string, op?: string, arg?: string) => {
    if (name === undefined) return '$';
    const v = vars[name];
    const missing = v === undefined || (colon === ':' && v === '');
    if (op === '?' && missing) throw new Error(`required variable ${name} is missing a value: ${arg ?? ''}`);
    if (op === '-' && missing) return arg ?? '';
    return v ?? '';
  });
}

/** As Compose does: the YAML parsed first (anchors, merge keys), then each string value interpolated. */
function compose(vars: Record<string, string>): Compose {
  const walk = (v: unknown): unknown =>
    typeof v === 'string'
      ? interpolate(v, vars)
      : Array.isArray(v)
        ? v.map(walk)
        : v !== null && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]))
          : v;
  return walk(parse(COMPOSE_TEXT, { merge: true })) as Compose;
}

/** Runs the README's block that writes docker/.env, in a scratch folder, and reads the file back. */
function readmeEnvFile(): Record<string, string> {
  const block = /```sh\n(cat > docker\/\.env <<EOF\n[\s\S]*?\nEOF\n)/.exec(README)?.[1];
  expect(block, 'the README writes docker/.env with a heredoc').toBeDefined();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-compose-env-'));
  onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'docker'));
  execFileSync('bash', ['-c', block ?? ''], { cwd: dir, env: { PATH: process.env.PATH ?? '' } });
  const vars: Record<string, string> = {};
  for (const line of fs.readFileSync(path.join(dir, 'docker/.env'), 'utf8').split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    if (m?.[1] !== undefined) vars[m[1]] = m[2] ?? '';
  }
  return vars;
}

const active = (c: Compose, profile: string) =>
  Object.entries(c.services)
    .filter(([, s]) => s.profiles?.includes(profile) === true)
    .map(([name]) => name)
    .sort();
const appServices = (c: Compose, profile: string) => active(c, profile).filter((n) => c.services[n]?.build !== undefined);

describe('docker/docker-compose.yml as the README describes it', () => {
  it('is a Compose v2 file (top-level name), which the README says is required', () => {
    expect(compose({ TRACE_INGEST_INIT_API_KEY: '' }).name).toBe('trace-ingest');
    expect(README).toMatch(/Docker Compose v2/);
    expect(COMPOSE_TEXT).toMatch(/Compose v2/);
  });

  it('takes the init key and the profile from the docker/.env the README writes, so later commands need no exported variable', () => {
    const env = readmeEnvFile();
    expect(env.TRACE_INGEST_INIT_API_KEY).toMatch(/^ti_[A-Za-z0-9_-]{43}$/);
    expect(env.COMPOSE_PROFILES).toBe('single');
    const c = compose(env);
    expect(c.services.server?.environment?.TRACE_INGEST_INIT_API_KEY).toBe(env.TRACE_INGEST_INIT_API_KEY);
    // Without the file, Compose stops with a message that says where the key goes.
    expect(() => compose({})).toThrow(/TRACE_INGEST_INIT_API_KEY.*docker\/\.env/);
    expect(fs.readFileSync(path.join(ROOT, '.gitignore'), 'utf8')).toMatch(/^docker\/\.env$/m);
  });

  it('has two separate stacks: single (one server) and scale-out (replicas, proxy, one PostgreSQL, Redis)', () => {
    const c = compose({ TRACE_INGEST_INIT_API_KEY: '' });
    for (const [name, s] of Object.entries(c.services)) expect(s.profiles, `${name} has a profile`).toBeDefined();
    expect(active(c, 'single')).toEqual(['clickhouse', 'server']);
    expect(active(c, 'scale-out')).toEqual(['clickhouse', 'postgres', 'proxy', 'redis', 'replica-1', 'replica-2']);
    // Each stack publishes ingest on 4000 and the console on the host's loopback 4001, once.
    for (const profile of ['single', 'scale-out']) {
      const ports = active(c, profile).flatMap((n) => c.services[n]?.ports ?? []);
      expect(ports.sort(), profile).toEqual(['127.0.0.1:4001:4001', '4000:4000']);
    }
  });

  it('gives every scale-out replica the one PostgreSQL control plane and the shared Redis; the README runs the CLI in a replica', () => {
    const c = compose({ TRACE_INGEST_INIT_API_KEY: '' });
    const replicas = appServices(c, 'scale-out');
    expect(replicas).toEqual(['replica-1', 'replica-2']);
    for (const r of replicas) {
      const env = c.services[r]?.environment ?? {};
      expect(new URL(env.DATABASE_URL ?? '').host).toBe('postgres:5432');
      expect(new URL(env.REDIS_URL ?? '').host).toBe('redis:6379');
      expect(new URL(env.CLICKHOUSE_URL ?? '').host).toBe('clickhouse:8123');
    }
    expect(c.services.server?.environment?.DATABASE_URL).toBeUndefined();
    // The CLI commands the README documents name a service that exists; in scale-out, one on PostgreSQL.
    const execs = [...README.matchAll(/docker compose -f docker\/docker-compose\.yml exec ([\w-]+) trace-ingest/g)].map((m) => m[1] ?? '');
    expect(execs).toContain('server');
    expect(execs).toContain('replica-1');
    for (const s of execs) expect(Object.keys(c.services)).toContain(s);
  });

  it('serves the scale-out console through the proxy, from either replica', () => {
    const c = compose({ TRACE_INGEST_INIT_API_KEY: '' });
    for (const r of ['replica-1', 'replica-2']) {
      expect(c.services[r]?.environment).toMatchObject({ CONSOLE_PORT: '4001', CONSOLE_HOST: '0.0.0.0' });
      expect(NGINX).toMatch(new RegExp(`server ${r}:4001 resolve`));
    }
    expect(c.services.proxy?.ports).toContain('127.0.0.1:4001:4001');
    expect(NGINX).toMatch(/listen 4001;[\s\S]*proxy_pass http:\/\/trace_ingest_console;/);
    expect(c.services.proxy?.volumes).toContain('./nginx.conf:/etc/nginx/nginx.conf:ro');
  });

  it("has nginx re-resolve the replicas' names through Docker's DNS (nginx 1.27.3+ `resolve`)", () => {
    const c = compose({ TRACE_INGEST_INIT_API_KEY: '' });
    expect(NGINX).toMatch(/^\s*resolver 127\.0\.0\.11\b/m);
    const servers = [...NGINX.matchAll(/^\s*server (replica-\d:\d+)([^;]*);/gm)];
    expect(servers).toHaveLength(4);
    for (const s of servers) expect(s[2]).toMatch(/\bresolve\b/);
    for (const upstream of NGINX.matchAll(/upstream \w+ \{([^}]*)\}/g)) expect(upstream[1]).toMatch(/^\s*zone \w+ \d+k;/m);
    const version = /^nginx:(\d+)\.(\d+)\.(\d+)/.exec(c.services.proxy?.image ?? '');
    const [major, minor, patch] = [Number(version?.[1]), Number(version?.[2]), Number(version?.[3])];
    expect(major * 1e6 + minor * 1e3 + patch).toBeGreaterThanOrEqual(1_027_003);
  });

  it('keeps Redis data on a volume with the append-only file', () => {
    const redis = compose({ TRACE_INGEST_INIT_API_KEY: '' }).services.redis;
    expect(redis?.volumes).toContain('redis-data:/data');
    expect(redis?.command?.join(' ')).toMatch(/--appendonly yes/);
  });

  it('hands passwords with @ : / # % to the servers intact: no password is written into a URL', () => {
    const password = 'p@ss:w/rd#%41';
    const c = compose({ TRACE_INGEST_INIT_API_KEY: '', CLICKHOUSE_PASSWORD: password, POSTGRES_PASSWORD: password });
    expect(COMPOSE_TEXT).not.toMatch(/_URL: .*\$\{/);
    expect(c.services.clickhouse?.environment?.CLICKHOUSE_PASSWORD).toBe(password);
    expect(c.services.postgres?.environment?.POSTGRES_PASSWORD).toBe(password);
    for (const name of ['server', 'replica-1']) {
      const config = loadConfig(c.services[name]?.environment ?? {});
      const ch = new URL(config.CLICKHOUSE_URL ?? '');
      expect([decodeURIComponent(ch.username), decodeURIComponent(ch.password), ch.host]).toEqual(['trace', password, 'clickhouse:8123']);
      if (name === 'replica-1') {
        const pg = new URL(config.DATABASE_URL ?? '');
        expect([decodeURIComponent(pg.username), decodeURIComponent(pg.password), pg.host]).toEqual(['trace', password, 'postgres:5432']);
      }
    }
  });

  it("builds the app services from docker/Dockerfile with a drain's stop grace and named volumes", () => {
    const c = compose({ TRACE_INGEST_INIT_API_KEY: '' });
    for (const name of ['server', 'replica-1', 'replica-2']) {
      const s = c.services[name] as Service & { stop_grace_period?: string };
      expect(s.build).toEqual({ context: '..', dockerfile: 'docker/Dockerfile' });
      expect(s.stop_grace_period).toBe('60s');
      const volume = (s.volumes ?? [])[0]?.split(':')[0] ?? '';
      expect(Object.keys(c.volumes ?? {})).toContain(volume);
    }
  });
});

describe('the Node.js versions of the image, CI, engines and the README', () => {
  it('agree: the Dockerfile pins the release scripts/node-env.sh pins, of the .nvmrc major, within engines', () => {
    const pinned = /^TI_NODE_VERSION=(\d+\.\d+\.\d+)$/m.exec(read('scripts/node-env.sh'))?.[1] ?? '';
    // The images the stages start from (others start from a stage of the file).
    const froms = [...read('docker/Dockerfile').matchAll(/^FROM (\S+)/gm)].map((m) => m[1] ?? '').filter((f) => f.includes(':'));
    expect(froms).toEqual([`node:${pinned}-bookworm-slim`, `node:${pinned}-bookworm-slim`]);
    expect(pinned.split('.')[0]).toBe(read('.nvmrc').trim());
    const engines = (JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node;
    const [, eMajor, eMinor] = /^\^(\d+)\.(\d+)\.\d+$/.exec(engines) ?? [];
    const [pMajor, pMinor] = pinned.split('.').map(Number);
    expect(pMajor).toBe(Number(eMajor));
    expect(pMinor).toBeGreaterThanOrEqual(Number(eMinor));
    expect(README).toContain(`node:${pinned}-bookworm-slim`);
  });
});
