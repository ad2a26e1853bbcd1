import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './child-server.js';

/**
 * A real clickhouse-server (Debian's package: 18.16 here) on free loopback
 * ports, with a temporary data dir and a config of its own, so tests never
 * touch a server or data someone else runs. `stop()` and `start()` keep the
 * data dir and ports, for outage tests.
 */
export interface ClickHouseTestServer {
  /** http://default:@127.0.0.1:<port>, without a database: append `/<database>` for a CLICKHOUSE_URL. */
  url: string;
  httpPort: number;
  tcpPort: number;
  /** How long the last start took until /ping answered, in ms. */
  startMs: number;
  /** A CLICKHOUSE_URL naming `database` on this server. */
  urlFor(database: string): string;
  /** SIGTERM by default (a graceful stop, for outage tests). */
  stop(signal?: NodeJS.Signals): Promise<void>;
  start(): Promise<void>;
  dispose(): Promise<void>;
}

function which(name: string): string | undefined {
  try {
    const found = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (found !== '') return found;
  } catch {
    // not on PATH
  }
  // The Debian package puts the server in /usr/sbin, which a non-login PATH may lack.
  for (const dir of ['/usr/sbin', '/usr/bin', '/usr/local/bin']) {
    const p = path.join(dir, name);
    if (fs.existsSync(p)) return p;
  }
  return undefined;
}

function findServer(): { bin: string; args: string[] } {
  const server = which('clickhouse-server');
  if (server !== undefined) return { bin: server, args: [] };
  const single = which('clickhouse');
  if (single !== undefined) return { bin: single, args: ['server'] };
  throw new Error(
    'clickhouse-server is not installed, and the ClickHouse tests need a real server: ' +
      'DEBIAN_FRONTEND=noninteractive apt-get install -y clickhouse-server clickhouse-client (.ci/run does this)',
  );
}

const xml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function writeConfig(dir: string, httpPort: number, tcpPort: number, password: string): string {
  const p = (s: string) => xml(path.join(dir, s));
  for (const d of ['data', 'tmp', 'user_files', 'format_schemas', 'log']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'users.xml'),
    `<yandex>
  <profiles><default></default></profiles>
  <users>
    <default>
      <password>${xml(password)}</password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default></default></quotas>
</yandex>
`,
  );
  const config = path.join(dir, 'config.xml');
  fs.writeFileSync(
    config,
    `<yandex>
  <logger>
    <level>warning</level>
    <log>${p('log/server.log')}</log>
    <errorlog>${p('log/error.log')}</errorlog>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <path>${p('data')}/</path>
  <tmp_path>${p('tmp')}/</tmp_path>
  <user_files_path>${p('user_files')}/</user_files_path>
  <format_schema_path>${p('format_schemas')}/</format_schema_path>
  <users_config>${p('users.xml')}</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
</yandex>
`,
  );
  return config;
}

function logTail(dir: string): string {
  try {
    return fs
      .readFileSync(path.join(dir, 'log', 'error.log'), 'utf8')
      .split('\n')
      .slice(-15)
      .join('\n');
  } catch {
    return '(no error log)';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `password`: the default user's (none by default); `url` and `urlFor` then carry none, for a test to add. */
export async function startClickHouse(opts: { password?: string } = {}): Promise<ClickHouseTestServer> {
  const { bin, args } = findServer();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-clickhouse-'));
  const httpPort = await freePort();
  let tcpPort = await freePort();
  while (tcpPort === httpPort) tcpPort = await freePort();
  const config = writeConfig(dir, httpPort, tcpPort, opts.password ?? '');
  const base = `http://127.0.0.1:${httpPort}`;

  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  // Never leave a server behind when the test process ends without dispose().
  const killOnExit = () => child?.kill('SIGKILL');
  process.once('exit', killOnExit);

  const ping = async (): Promise<boolean> => {
    try {
      const res = await fetch(`${base}/ping`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      return res.ok;
    } catch {
      return false;
    }
  };

  const server: ClickHouseTestServer = {
    url: `http://default:@127.0.0.1:${httpPort}`,
    httpPort,
    tcpPort,
    startMs: 0,
    urlFor: (database) => `http://default:@127.0.0.1:${httpPort}/${encodeURIComponent(database)}`,
    async start() {
      if (child !== undefined) return;
      const t0 = performance.now();
      // In the foreground the child is the server itself: its exit is the server's exit.
      const proc = spawn(bin, [...args, `--config-file=${config}`], { stdio: 'ignore', cwd: dir });
      proc.unref();
      child = proc;
      let gone = false;
      exited = new Promise((resolve) => proc.once('exit', () => ((gone = true), resolve())));
      const deadline = Date.now() + 30_000;
      while (!(await ping())) {
        if (gone) {
          child = undefined;
          throw new Error(`clickhouse-server exited during start (config ${config}):\n${logTail(dir)}`);
        }
        if (Date.now() > deadline) {
          await server.stop();
          throw new Error(`clickhouse-server did not answer ${base}/ping within 30 s:\n${logTail(dir)}`);
        }
        await sleep(20);
      }
      server.startMs = performance.now() - t0;
    },
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      const proc = child;
      if (proc === undefined) return;
      proc.kill(signal);
      // The timer is cleared as soon as the server exits: a pending one would keep the test process alive.
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 30_000)));
      const stopped = await Promise.race([exited.then(() => true), timeout]);
      clearTimeout(timer);
      if (!stopped) {
        proc.kill('SIGKILL');
        await exited;
      }
      child = undefined;
    },
    async dispose() {
      // The data dir is deleted next: no need for the graceful (~8 s) shutdown.
      await server.stop('SIGKILL');
      process.removeListener('exit', killOnExit);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  await server.start();
  return server;
}
