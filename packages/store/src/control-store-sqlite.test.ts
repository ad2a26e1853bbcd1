import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ServiceUnavailableError } from '@trace-ingest/shared/errors';
import { SqliteControlStore } from './control-store-sqlite.js';
import { controlStoreContract } from './control-store.contract.js';

describe('control store on SQLite', () => {
  controlStoreContract(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-keys-'));
    const store = new SqliteControlStore(path.join(dir, 'k.sqlite'));
    onTestFinished(async () => {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    await store.start();
    return store;
  });
});

describe('a SQLite control store that another connection holds locked', () => {
  it('refuses a write at once with a retryable 503, without waiting', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-keys-'));
    const file = path.join(dir, 'k.sqlite');
    const store = new SqliteControlStore(file, { busyTimeoutMs: 0 });
    await store.start();
    const org = await store.createOrg({ name: 'acme' });
    const other = new Database(file);
    other.exec('BEGIN IMMEDIATE');
    onTestFinished(async () => {
      other.close();
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    const started = performance.now();
    const e = await store.addMonthUsage(org.id, '2026-11', 1).catch((x: unknown) => x);
    expect(performance.now() - started).toBeLessThan(100);
    expect(e).toBeInstanceOf(ServiceUnavailableError);
    expect((e as ServiceUnavailableError).httpCode).toBe(503);
    expect((e as ServiceUnavailableError).headers['Retry-After']).toBe('1');
  });
});
