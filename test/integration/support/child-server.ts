import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { onTestFinished } from 'vitest';

const SERVER_BIN = fileURLToPath(new URL('../../../packages/server/bin/trace-ingest-server.js', import.meta.url));

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** The real server binary (built `dist/`) as a child process. */
export interface ChildServer {
  url: string;
  proc: ChildProcess;
  output: () => string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

/** `notReady`: settings under which the server starts refusing (it is waited for on /healthz, not /readyz). */
export async function startChildServer(env: Record<string, string>, notReady?: Record<string, string>): Promise<ChildServer> {
  const port = await freePort();
  const proc = spawn(process.execPath, [SERVER_BIN], {
    // Fixtures carry fixed dates in the past: no retention unless a test sets one.
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'warn',
      RETENTION_DAYS: '0',
      TEXT_RETENTION_DAYS: '0',
      ...env,
      ...notReady,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: path.dirname(SERVER_BIN),
  });
  let out = '';
  proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`server exited during start (${proc.exitCode}): ${out}`);
    try {
      if ((await fetch(`${url}/${notReady === undefined ? 'readyz' : 'healthz'}`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`server did not become ready: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url, proc, output: () => out, exited };
}

/** startChildServer, killed when the test finishes. */
export async function startChildServerForTest(env: Record<string, string>, notReady?: Record<string, string>): Promise<ChildServer> {
  const t = await startChildServer(env, notReady);
  onTestFinished(async () => {
    t.proc.kill('SIGKILL');
    await t.exited;
  });
  return t;
}

/** POST /ingest of these traces with this key, as a client sends them. */
export function postTraces(url: string, key: string, traces: unknown[]): Promise<Response> {
  return fetch(`${url}/ingest`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ version: 'v1', traces }),
  });
}
