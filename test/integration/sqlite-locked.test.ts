import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { utcMonth } from '@trace-ingest/shared/ids';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { makeBulkPayload } from '../factories.js';
import { startChildServerForTest } from './support/child-server.js';
import { timedFetch, timedIngest } from './support/timed.js';

const BETTER_SQLITE3 = createRequire(import.meta.url).resolve('better-sqlite3');

/** Another process that takes the file's write lock and holds it until killed. */
async function lockInAnotherProcess(file: string): Promise<() => Promise<void>> {
  const script = `
    const db = new (require(${JSON.stringify(BETTER_SQLITE3)}))(${JSON.stringify(file)});
    db.exec('BEGIN IMMEDIATE');
    process.stdout.write('locked\\n');
    setInterval(() => undefined, 1000);`;
  const proc = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const release = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await exited;
  };
  onTestFinished(release);
  await new Promise<void>((resolve, reject) => {
    proc.stdout.once('data', () => resolve());
    proc.once('exit', (code) => reject(new Error(`locker exited ${code}`)));
  });
  return release;
}

/**
 * The SQLite control store write-locked by another process (the CLI, a
 * backup): every connection of the server (the control store's, and the one
 * for budgets and console tokens) fails a write at once instead of waiting
 * on the event loop, so /healthz and ingest keep answering, and the quota
 * count catches up once the lock is gone.
 */
describe('a SQLite control store locked by another process', () => {
  it('never freezes the event loop: /healthz and ingest answer at once, the count follows the lock', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-sqlite-lock-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const keys = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'));
    await keys.start();
    onTestFinished(() => keys.close());
    const org = await keys.createOrg({ name: 'acme' });
    const { key } = await keys.createKey({ orgName: 'acme' });
    // Budgets checked and alerts claimed often, as a busy install does; the console's token connection open too.
    const server = await startChildServerForTest({ DATA_DIR: dir, BUDGET_CHECK_MS: '100', CONSOLE_PORT: '0', FLUSH_INTERVAL_MS: '100' });

    const release = await lockInAnotherProcess(path.join(dir, 'trace-ingest.sqlite'));
    const health: number[] = [];
    const ingest: { ms: number; status: number }[] = [];
    const until = performance.now() + 3500;
    await Promise.all([
      (async () => {
        while (performance.now() < until) {
          health.push((await timedFetch(`${server.url}/healthz`, {}, 10_000)).ms);
          await new Promise((r) => setTimeout(r, 50));
        }
      })(),
      (async () => {
        while (performance.now() < until) {
          ingest.push(await timedIngest(server.url, key, makeBulkPayload(1, 2), 10_000));
          await new Promise((r) => setTimeout(r, 100));
        }
      })(),
    ]);
    await release();

    expect(Math.max(...health)).toBeLessThan(500);
    expect(Math.max(...ingest.map((a) => a.ms))).toBeLessThan(500);
    expect(ingest.every((a) => a.status === 202)).toBe(true);
    const month = utcMonth(Date.now());
    let used = 0;
    for (let i = 0; i < 100 && used < ingest.length * 2; i++) {
      used = await keys.getMonthUsage(org.id, month);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(used).toBe(ingest.length * 2);
  }, 60_000);
});
