import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import type { Pricing } from '@trace-ingest/store/pricing';
import type { SpanStore } from '@trace-ingest/store/span-store';
import { AdminServer } from './admin.js';
import { Metrics } from './metrics.js';

describe('AdminServer socket', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-admin-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const admin = (socket: string) =>
    new AdminServer(socket, { kind: 'duckdb' } as SpanStore, {} as Pick<Pricing, 'refresh' | 'price'>, pino({ level: 'silent' }), new Metrics());

  it('leaves a socket another process listens on in place, and replaces one nothing listens on', async () => {
    const socket = path.join(dir, 'admin.sock');
    const other = net.createServer((c) => c.end());
    await new Promise<void>((r) => other.listen(socket, r));
    await expect(admin(socket).start()).rejects.toThrow(/another process listens on/);
    await new Promise<void>((resolve, reject) => net.connect(socket).once('connect', resolve).once('error', reject));
    await new Promise<void>((r) => other.close(() => r()));
    // A listener killed with SIGKILL leaves its socket file: nothing listens on it any more.
    const killed = spawn(process.execPath, ['-e', `require('node:net').createServer().listen(${JSON.stringify(socket)}, () => console.log('up'))`]);
    await new Promise((r) => killed.stdout.once('data', r));
    killed.kill('SIGKILL');
    await new Promise((r) => killed.once('exit', r));
    expect(fs.statSync(socket).isSocket()).toBe(true);
    const a = admin(socket);
    onTestFinished(() => a.close());
    await a.start();
    const res = await new Promise<number>((resolve, reject) => {
      const c = net.connect(socket, () => c.write('GET /v1/ping HTTP/1.0\r\n\r\n'));
      c.once('data', (d: Buffer) => resolve(Number(d.toString().split(' ')[1])));
      c.once('error', reject);
    });
    expect(res).toBe(200);
  });
});
