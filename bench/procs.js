// Child processes of the benchmark: the service, the floors, the load generator; and what is read off them.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('..', import.meta.url));
const SERVER = path.join(root, 'packages/server/bin/trace-ingest-server.js');
const CLI = path.join(root, 'packages/cli/bin/trace-ingest.js');
const here = (f) => path.join(root, 'bench', f);

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function waitReady(url, proc) {
  for (let i = 0; i < 1200; i++) {
    if (proc && proc.exitCode !== null) throw new Error(`server exited during start (${proc.exitCode})`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(50);
  }
  throw new Error(`server at ${url} did not become ready`);
}

/** Peak and current RSS of a process, from /proc: VmHWM is the kernel's own high-water mark. */
export function memoryOf(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(s)?.[1] ?? 0) * 1024;
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return undefined; // exited
  }
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system) of a /proc `stat` line, a process's or one thread's. */
function statCpu(stat) {
  // The command name (field 2) may hold spaces: count the fields after its closing parenthesis.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / CLK_TCK; // utime, stime (fields 14 and 15)
}

/** CPU seconds (user + system, every thread) a live process has used so far, from /proc/<pid>/stat. */
export function cpuOf(pid) {
  try {
    return statCpu(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined; // exited
  }
}

/**
 * CPU seconds a live process has used so far by kind of thread: `main` (the event loop: the request path and the
 * flusher's JS), `libuv` (the thread pool: DuckDB's statements, fsync, zlib), `gc` (V8's helper threads: mostly
 * garbage collection) and `other`. Undefined once it exited.
 */
export function threadCpuOf(pid) {
  const kinds = { main: 0, libuv: 0, gc: 0, other: 0 };
  let tasks;
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  for (const tid of tasks) {
    let s;
    try {
      s = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const name = s.slice(s.indexOf('(') + 1, s.lastIndexOf(')'));
    const kind = tid === String(pid) ? 'main' : name === 'libuv-worker' ? 'libuv' : name.startsWith('V8') ? 'gc' : 'other';
    kinds[kind] += statCpu(s);
  }
  return kinds;
}

/**
 * The CPUs (a `taskset -c` list) the server and floor processes, and the load generators, are confined to:
 * undefined leaves them free. Set once from the command line, so a run on one core can be set beside one on two.
 */
const pinned = { server: undefined, load: undefined };
export function pinCpus({ server, load }) {
  pinned.server = server;
  pinned.load = load;
}

/** spawn(), through `taskset -c` when the process's kind is pinned. */
function spawnOn(kind, file, args, opts) {
  const cpus = pinned[kind];
  return cpus === undefined ? spawn(file, args, opts) : spawn('taskset', ['-c', cpus, file, ...args], opts);
}

/**
 * CPU seconds of this process's children that have exited and been reaped (cutime + cstime):
 * read before and after a child's exit, the difference is that child's whole CPU time,
 * the part after the last /proc sample included (a drain's last insert and DuckDB's checkpoint).
 */
export function reapedChildrenCpu() {
  const s = fs.readFileSync('/proc/self/stat', 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return (Number(f[13]) + Number(f[14])) / CLK_TCK; // cutime, cstime (fields 16 and 17)
}

/** Polls a process's memory until stopped; the peak survives the process's exit. */
export function rssSampler(pid, everyMs = 50) {
  let peak = 0;
  const read = () => {
    const m = memoryOf(pid);
    if (m) peak = Math.max(peak, m.hwm, m.rss);
  };
  read();
  const t = setInterval(read, everyMs);
  return { peak: () => (read(), peak), stop: () => (clearInterval(t), read(), peak) };
}

/** Runs a bench module in a child process with a JSON config file (MB bodies do not fit in argv); resolves with its JSON stdout. */
export function runChild(script, cfg) {
  const file = path.join(os.tmpdir(), `ti-bench-${path.basename(script, '.js')}-${process.pid}-${Date.now()}.json`);
  fs.writeFileSync(file, JSON.stringify(cfg));
  return new Promise((resolve, reject) => {
    // The load generator's CPUs apply to load.js; the store floor is a server's work.
    const child = spawnOn(script === 'load.js' ? 'load' : 'server', process.execPath, [here(script), file], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.on('exit', (code) => {
      fs.rmSync(file, { force: true });
      if (code !== 0) return reject(new Error(`${script} exited ${code}`));
      try {
        resolve(JSON.parse(out));
      } catch (e) {
        reject(new Error(`${script} printed no result: ${e.message}`));
      }
    });
  });
}

export const runLoad = (cfg) => runChild('load.js', cfg);

export function cli(env, ...args) {
  return execFileSync(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A floor server (discard | parse) as its own process. */
export async function startFloor(kind) {
  const proc = spawnOn('server', process.execPath, [here('floor-server.js'), kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    proc.stdout.once('data', (c) => resolve(Number(String(c).trim())));
    proc.once('exit', (code) => reject(new Error(`floor server exited ${code}`)));
  });
  const exited = new Promise((r) => proc.once('exit', r));
  return { proc, url: `http://127.0.0.1:${port}`, stop: () => (proc.kill('SIGTERM'), exited) };
}

function chParts(url) {
  const u = new URL(url);
  const auth = `user=${encodeURIComponent(decodeURIComponent(u.username) || 'default')}&password=${encodeURIComponent(decodeURIComponent(u.password))}`;
  return { base: `${u.protocol}//${u.host}/?${auth}`, db: u.pathname.slice(1) };
}

export async function clickhouseQuery(url, sql) {
  const { base } = chParts(url);
  const res = await fetch(base, { method: 'POST', body: sql });
  const text = await res.text();
  if (!res.ok) throw new Error(`ClickHouse: ${text.slice(0, 300)}`);
  return text.trim();
}

/** Spans in the store: DuckDB opened directly (the server must have exited), ClickHouse with FINAL. */
export async function countStored(env) {
  if (env.CLICKHOUSE_URL) return Number(await clickhouseQuery(env.CLICKHOUSE_URL, `SELECT count() FROM ${chParts(env.CLICKHOUSE_URL).db}.spans FINAL`));
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const inst = await DuckDBInstance.create(path.join(env.DATA_DIR, 'spans.duckdb'));
  const conn = await inst.connect();
  try {
    return Number((await conn.runAndReadAll('SELECT count(*)::BIGINT AS n FROM spans')).getRowObjectsJson()[0].n);
  } finally {
    conn.closeSync();
    inst.closeSync();
  }
}

/** Bytes in the write log folder (segments not yet flushed and trimmed). */
export function walBytes(dataDir) {
  let total = 0;
  const walk = (d) => {
    let entries;
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        try {
          total += fs.statSync(p).size;
        } catch {
          // trimmed meanwhile
        }
      }
    }
  };
  walk(path.join(dataDir, 'wal'));
  return total;
}

/**
 * The real server (built dist/) on loopback with its own temp DATA_DIR, a plan without
 * limits and a key made with the CLI. `replicas` > 1 (or `shared`) shares PostgreSQL, Redis and
 * ClickHouse. `onLog(i, line)` receives each line replica i logs (stdout), when given.
 */
export async function startService({ mode, replicas = 1, extraEnv = {}, nodeArgs = [], grpc = false, shared = replicas > 1, onLog }) {
  const run = `bench_${Date.now()}_${process.pid}`;
  const dataDirs = Array.from({ length: replicas }, () => fs.mkdtempSync(path.join(os.tmpdir(), 'ti-bench-')));
  const env = { DATA_DIR: dataDirs[0], LOG_LEVEL: 'warn' };
  if (process.env.CLICKHOUSE_URL) env.CLICKHOUSE_URL = process.env.CLICKHOUSE_URL.replace(/\/[^/]*$/, `/${run}`);
  if (shared) {
    if (!process.env.DATABASE_URL || !process.env.REDIS_URL || !process.env.CLICKHOUSE_URL)
      throw new Error('replicas on shared backends need DATABASE_URL, REDIS_URL and CLICKHOUSE_URL');
    const db = new URL(process.env.DATABASE_URL);
    db.searchParams.set('schema', run);
    Object.assign(env, { DATABASE_URL: db.toString(), REDIS_URL: process.env.REDIS_URL, REDIS_KEY_PREFIX: run });
  }
  cli(env, 'plans', 'create', 'bench', '--monthly-spans', '1000000000000', '--rate-limit', '1000000');
  cli(env, 'orgs', 'create', 'bench', '--plan', 'bench');
  const { key } = JSON.parse(cli(env, 'keys', 'create', '--org', 'bench', '--json'));
  const servers = [];
  for (const dir of dataDirs) {
    const port = await freePort();
    const grpcPort = grpc ? await freePort() : undefined;
    let stderr = '';
    const proc = spawnOn('server', process.execPath, [...nodeArgs, SERVER], {
      env: {
        ...process.env,
        ...env,
        DATA_DIR: dir,
        PORT: String(port),
        METRICS_PORT: '0',
        HOST: '127.0.0.1',
        INGEST_DURABILITY: mode,
        DRAIN_GRACE_MS: '0',
        DRAIN_TIMEOUT_MS: '600000',
        ...(grpcPort === undefined ? {} : { OTLP_GRPC_PORT: String(grpcPort) }),
        ...extraEnv,
      },
      stdio: ['ignore', onLog ? 'pipe' : 'ignore', 'pipe'],
    });
    if (onLog) {
      const i = servers.length;
      let rest = '';
      proc.stdout.on('data', (c) => {
        const lines = (rest + c).split('\n');
        rest = lines.pop();
        for (const line of lines) onLog(i, line);
      });
    }
    proc.stderr.on('data', (c) => {
      stderr += c;
      process.stderr.write(c);
    });
    const url = `http://127.0.0.1:${port}`;
    const exited = new Promise((r) => proc.once('exit', (code, signal) => r({ code, signal })));
    servers.push({ proc, url, grpcTarget: grpcPort === undefined ? undefined : `127.0.0.1:${grpcPort}`, dir, exited, stderr: () => stderr });
    await waitReady(url, proc);
  }
  return {
    env,
    key,
    servers,
    urls: servers.map((s) => s.url),
    /** host:port of each server's OTLP/gRPC listener (with `grpc`). */
    grpcTargets: servers.map((s) => s.grpcTarget),
    /** SIGTERM (the drain flushes every accepted span), then wait for exit. */
    stop: async () => {
      for (const s of servers) if (s.proc.exitCode === null) s.proc.kill('SIGTERM');
      return Promise.all(servers.map((s) => s.exited));
    },
    cleanup: async () => {
      for (const s of servers) if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGKILL');
      for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
      await dropRun(env, run);
    },
  };
}

/** Leaves shared servers as they were: the run's ClickHouse database, PostgreSQL schema and Redis keys go. */
async function dropRun(env, run) {
  if (env.CLICKHOUSE_URL) await clickhouseQuery(env.CLICKHOUSE_URL, `DROP DATABASE IF EXISTS ${run}`).catch(() => undefined);
  if (env.DATABASE_URL) {
    const { default: pg } = await import('pg');
    const base = new URL(env.DATABASE_URL);
    base.searchParams.delete('schema');
    const client = new pg.Client({ connectionString: base.toString() });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${run} CASCADE`);
    await client.end();
  }
  if (env.REDIS_URL) {
    const { Redis } = await import('ioredis');
    const redis = new Redis(env.REDIS_URL);
    const keys = await redis.keys(`${run}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  }
}
