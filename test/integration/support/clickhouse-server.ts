import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './child-server.js';

/**
 * Debian's clickhouse-server (18.16 on this distribution) on free loopback
 * ports with a temporary data dir and a config of its own. It can be stopped
 * and started again on the same data (outage tests).
 */
export interface ClickHouseServer {
  /** http://127.0.0.1:<port> (no database). */
  httpUrl: string;
  /** A CLICKHOUSE_URL for a database of this run. */
  urlFor(database: string): string;
  stop(): Promise<void>;
  start(): Promise<void>;
  dispose(): Promise<void>;
}

function findBinary(): string {
  for (const candidate of ['clickhouse-server', 'clickhouse']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${candidate}`], { encoding: 'utf8' }).trim();
    } catch {
      // try the next name
    }
  }
  throw new Error('clickhouse-server is not installed: apt-get install clickhouse-server clickhouse-client (.ci/run does this)');
}

function writeConfig(dir: string, httpPort: number, tcpPort: number, interserverPort: number): string {
  const p = (s: string) => path.join(dir, s);
  for (const d of ['data', 'tmp', 'user_files', 'format_schemas', 'log']) fs.mkdirSync(p(d), { recursive: true });
  fs.writeFileSync(
    p('users.xml'),
    `<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
`,
  );
  const config = p('config.xml');
  fs.writeFileSync(
    config,
    `<yandex>
  <logger><level>warning</level><log>${p('log/server.log')}</log><errorlog>${p('log/error.log')}</errorlog></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <interserver_http_port>${interserverPort}</interserver_http_port>
  <path>${p('data')}/</path>
  <tmp_path>${p('tmp')}/</tmp_path>
  <user_files_path>${p('user_files')}/</user_files_path>
  <format_schema_path>${p('format_schemas')}/</format_schema_path>
  <users_config>${p('users.xml')}</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
`,
  );
  return config;
}

async function waitFor(check: () => Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startClickHouse(): Promise<ClickHouseServer> {
  const bin = findBinary();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-ch-'));
  const [httpPort, tcpPort, interserverPort] = [await freePort(), await freePort(), await freePort()];
  const config = writeConfig(dir, httpPort, tcpPort, interserverPort);
  const httpUrl = `http://127.0.0.1:${httpPort}`;
  const ping = async () => {
    try {
      return (await fetch(`${httpUrl}/ping`)).ok;
    } catch {
      return false;
    }
  };
  const args = path.basename(bin) === 'clickhouse' ? ['server'] : [];
  let pid: number | undefined;
  const start = async () => {
    // In the foreground (no --daemon) the child is the server itself, so its pid is the one to signal.
    const child = spawn(bin, [...args, `--config-file=${config}`], { stdio: 'ignore', detached: true });
    child.unref();
    pid = child.pid;
    await waitFor(ping, `clickhouse-server on ${httpUrl} (see ${dir}/log)`);
  };
  const stop = async () => {
    const p = pid;
    if (p === undefined) return;
    pid = undefined;
    try {
      process.kill(p, 'SIGTERM');
    } catch {
      return;
    }
    await waitFor(
      async () => {
        try {
          process.kill(p, 0);
          return false;
        } catch {
          return !(await ping());
        }
      },
      'clickhouse-server to stop',
    );
  };
  await start();
  return {
    httpUrl,
    urlFor: (database) => `http://default:@127.0.0.1:${httpPort}/${database}`,
    stop,
    start,
    async dispose() {
      await stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
