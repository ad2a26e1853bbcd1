import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ServiceUnavailableError } from '@trace-ingest/shared/errors';
import { Budgets } from './budgets.js';
import { ConsoleTokens } from './console-tokens.js';
import { openControlDriver, sharedControlDriver } from './control-database.js';
import { SqlControlStore } from './control-store.js';
import { SecretBox } from './secret-box.js';

describe('one SQLite connection shared by the key store, budgets and console tokens', () => {
  it('is opened and closed by its owner alone, and none of its users waits for a lock', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-control-db-'));
    const file = path.join(dir, 'control.sqlite');
    const driver = await openControlDriver({ sqliteFile: file, sqliteBusyTimeoutMs: 0 });
    onTestFinished(async () => {
      await driver.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    await driver.open();
    const keys = new SqlControlStore(sharedControlDriver(driver));
    const budgets = new Budgets(sharedControlDriver(driver), new SecretBox({ keys: undefined, keyFile: path.join(dir, 'secrets.key'), shared: false }));
    const tokens = new ConsoleTokens(sharedControlDriver(driver));
    await Promise.all([keys.start(), budgets.start(), tokens.start()]);
    const org = await keys.createOrg({ name: 'acme' });

    // A user's close leaves the connection to the others.
    await keys.close();
    await tokens.close();
    await budgets.set({ orgId: org.id, customerId: '', monthlyUsd: '10', alertAt: [50, 100], webhookUrl: null });
    expect((await budgets.list(org.id)).map((b) => b.monthlyUsd)).toEqual(['10']);

    // busy_timeout 0 on the one connection: a write under another process's lock fails at once, retryable.
    const other = new Database(file);
    other.exec('BEGIN IMMEDIATE');
    const started = performance.now();
    const e = await tokens.create({ orgId: null, orgName: null }).catch((x: unknown) => x);
    other.exec('ROLLBACK');
    other.close();
    expect(performance.now() - started).toBeLessThan(100);
    expect(e).toBeInstanceOf(ServiceUnavailableError);

    await driver.close();
    await expect(keys.getOrg('acme')).rejects.toThrow('control store is not started');
  });
});
