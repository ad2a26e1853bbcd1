import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConflictError, UsageError } from '@trace-ingest/shared/errors';
import { hashApiKey } from '@trace-ingest/shared/ids';
import { SqliteKeyStore } from './key-store-sqlite.js';

describe('SqliteKeyStore', () => {
  let dir: string;
  let store: SqliteKeyStore;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-keys-'));
    store = new SqliteKeyStore(path.join(dir, 'k.sqlite'));
    await store.start();
  });
  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('has a default plan after migrating, and migrating again changes nothing', async () => {
    await store.close();
    await store.start();
    const plans = await store.listPlans();
    expect(plans.map((p) => p.name)).toEqual(['default']);
  });

  it('resolves a key by its hash only, and not after revocation', async () => {
    await store.createOrg({ name: 'acme' });
    const created = await store.createKey({ orgName: 'acme', name: 'ci' });
    expect(created.key).toMatch(/^ti_[A-Za-z0-9_-]{43}$/);
    expect(created.prefix).toBe(created.key.slice(0, 12));
    const resolved = await store.resolveKeyHash(hashApiKey(created.key));
    expect(resolved).toMatchObject({ orgName: 'acme', planName: 'default', rateLimitRps: 1000, prefix: created.prefix });
    expect(JSON.stringify(await store.listKeys())).not.toContain(created.key);
    await store.revokeKey(created.prefix);
    expect(await store.resolveKeyHash(hashApiKey(created.key))).toBeNull();
  });

  it('moves an org to another plan at once', async () => {
    await store.createPlan({ name: 'tiny', monthlySpans: 10, rateLimitRps: 2 });
    await store.createOrg({ name: 'acme' });
    const k = await store.createKey({ orgName: 'acme' });
    await store.setOrgPlan('acme', 'tiny');
    expect(await store.resolveKeyHash(hashApiKey(k.key))).toMatchObject({ planName: 'tiny', monthlySpans: 10, rateLimitRps: 2 });
    await store.updatePlan('tiny', { monthlySpans: 20 });
    expect(await store.resolveKeyHash(hashApiKey(k.key))).toMatchObject({ monthlySpans: 20, rateLimitRps: 2 });
  });

  it('refuses duplicates, unknown names and bad numbers with clear errors', async () => {
    await store.createOrg({ name: 'acme' });
    await expect(store.createOrg({ name: 'acme' })).rejects.toBeInstanceOf(ConflictError);
    await expect(store.createOrg({ name: 'x', planName: 'nope' })).rejects.toThrow(/unknown plan "nope"/);
    await expect(store.createKey({ orgName: 'nope' })).rejects.toBeInstanceOf(UsageError);
    await expect(store.createPlan({ name: 'p', monthlySpans: -1, rateLimitRps: 1 })).rejects.toThrow(/>= 0/);
    await expect(store.createPlan({ name: 'p', monthlySpans: 1, rateLimitRps: 0 })).rejects.toThrow(/>= 1/);
    await expect(store.revokeKey('ti_missing')).rejects.toThrow(/no API key/);
  });

  it('counts usage per org and month, across restarts', async () => {
    const org = await store.createOrg({ name: 'acme' });
    expect(await store.addMonthUsage(org.id, '2026-11', 5)).toBe(5);
    expect(await store.addMonthUsage(org.id, '2026-11', 7)).toBe(12);
    await store.close();
    await store.start();
    expect(await store.getMonthUsage(org.id, '2026-11')).toBe(12);
    expect(await store.getMonthUsage(org.id, '2026-12')).toBe(0);
  });

  it('accepts a supplied key once (headless init)', async () => {
    await store.createOrg({ name: 'acme' });
    const key = 'ti_' + 'a'.repeat(43);
    await store.createKey({ orgName: 'acme', key });
    await expect(store.createKey({ orgName: 'acme', key })).rejects.toBeInstanceOf(ConflictError);
    await expect(store.createKey({ orgName: 'acme', key: 'short' })).rejects.toBeInstanceOf(UsageError);
  });

  it('keeps price overrides and bumps their version on change', async () => {
    const v0 = await store.priceOverridesVersion();
    const base = { orgId: '', provider: '', model: 'my-model', validFrom: 0, inputPerMtok: '1', outputPerMtok: '2', cachedInputPerMtok: null, cacheWriteInputPerMtok: null, reasoningPerMtok: null, imageEach: null, webSearchEach: null, requestEach: null };
    await store.setPriceOverride(base);
    await store.setPriceOverride({ ...base, inputPerMtok: '3' });
    const list = await store.listPriceOverrides();
    expect(list).toHaveLength(1);
    expect(list[0]?.inputPerMtok).toBe('3');
    expect(await store.priceOverridesVersion()).not.toBe(v0);
    expect(await store.unsetPriceOverride({ orgId: '', provider: '', model: 'my-model' })).toBe(1);
  });
});
