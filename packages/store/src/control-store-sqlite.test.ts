import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ServiceUnavailableError } from '@trace-ingest/shared/errors';
import { hashApiKey } from '@trace-ingest/shared/ids';
import { SqliteControlDriver, SqliteControlStore } from './control-store-sqlite.js';
import { SqlControlStore, type ControlDriver } from './control-store.js';
import { makeOverride } from '../../../test/factories.js';
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

describe('keys resolved on SQLite', () => {
  /** A store on a fresh file whose driver counts the statements it runs, and a second store on the same file (as the CLI is). */
  async function twoStores() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-keys-'));
    const file = path.join(dir, 'k.sqlite');
    const driver = new SqliteControlDriver(file);
    const statements: string[] = [];
    const counted: ControlDriver = {
      kind: driver.kind,
      open: () => driver.open(),
      close: () => driver.close(),
      all: <R>(sql: string, params: readonly unknown[]) => {
        statements.push(sql);
        return driver.all<R>(sql, params);
      },
      transaction: (s) => driver.transaction(s),
      isUniqueViolation: (e) => driver.isUniqueViolation(e),
      version: (tables) => driver.version(tables),
    };
    const store = new SqlControlStore(counted);
    const other = new SqliteControlStore(file);
    onTestFinished(async () => {
      await other.close();
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    await store.start();
    await other.start();
    return { store, other, file, lookups: () => statements.filter((s) => s.includes('k.key_hash = ?')).length };
  }

  it('reads a key once while nothing it is read from changes, and again after any change, by this connection or another', async () => {
    const { store, other, file, lookups } = await twoStores();
    await store.createPlan({ name: 'pro', monthlySpans: 1000, rateLimitRps: 10 });
    const org = await store.createOrg({ name: 'acme', planName: 'pro' });
    const a = await store.createKey({ orgName: 'acme' });
    const b = await store.createKey({ orgName: 'acme' });
    const [ha, hb] = [hashApiKey(a.key), hashApiKey(b.key)];

    expect(await store.resolveKeyHash(ha)).toMatchObject({ orgName: 'acme', rateLimitRps: 10 });
    expect(await store.resolveKeyHash(hb)).toMatchObject({ orgName: 'acme' });
    const read = lookups();
    for (let i = 0; i < 5; i++) expect(await store.resolveKeyHash(ha)).toMatchObject({ keyId: a.id });
    // Usage counted on every request writes other tables: the keys stay resolved.
    await store.addMonthUsage(org.id, '2026-11', 5);
    expect(await store.resolveKeyHash(ha)).toMatchObject({ keyId: a.id });
    expect(lookups()).toBe(read);
    // A resolved key is the store's: a caller cannot change what the next request gets.
    const got = await store.resolveKeyHash(ha);
    expect(() => Object.assign(got ?? {}, { rateLimitRps: 1e9 })).toThrow(TypeError);

    // Another connection (the CLI) changes the plan, then revokes a key.
    await other.updatePlan('pro', { rateLimitRps: 20 });
    expect(await store.resolveKeyHash(ha)).toMatchObject({ rateLimitRps: 20 });
    expect(lookups()).toBe(read + 1);
    await other.revokeKey(b.prefix);
    expect(await store.resolveKeyHash(hb)).toBeNull();
    expect(await store.resolveKeyHash(ha)).toMatchObject({ keyId: a.id });

    // This connection changes the org, then revokes the other key.
    await store.setOrgContentPolicy('acme', '{"record":"no-text","rules":[],"custom":[]}');
    expect(await store.resolveKeyHash(ha)).toMatchObject({ contentPolicy: '{"record":"no-text","rules":[],"custom":[]}' });
    await store.revokeKey(a.prefix);
    expect(await store.resolveKeyHash(ha)).toBeNull();

    // A write straight to the file, outside any store (an operator's sqlite3 shell).
    const c = await store.createKey({ orgName: 'acme' });
    expect(await store.resolveKeyHash(hashApiKey(c.key))).not.toBeNull();
    const raw = new Database(file);
    raw.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?').run(Date.now(), c.id);
    raw.close();
    expect(await store.resolveKeyHash(hashApiKey(c.key))).toBeNull();
  });

  it('reads the price overrides version again only after a change, by this connection or another', async () => {
    const { store, other } = await twoStores();
    const base = makeOverride();
    expect(await store.priceOverridesVersion()).toBe('0');
    await other.setPriceOverride(base);
    expect(await store.priceOverridesVersion()).toBe('1');
    await store.setPriceOverride({ ...base, inputPerMtok: '2' });
    expect(await store.priceOverridesVersion()).toBe('2');
    expect(await store.unsetPriceOverride({ orgId: '', provider: '', model: 'my-model' })).toBe(1);
    expect(await store.priceOverridesVersion()).toBe('3');
  });
});
