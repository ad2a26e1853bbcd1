import { expect, it } from 'vitest';
import { ConflictError, UsageError } from '@trace-ingest/shared/errors';
import { hashApiKey } from '@trace-ingest/shared/ids';
import { makeOverride } from '../../../test/factories.js';
import { AlreadyExistsError, AmbiguousKeyError, UnknownNameError } from './control-store.js';
import { USAGE_BATCH_MEMORY_MS, type ControlStore } from './control-store-types.js';

export function controlStoreContract(fresh: () => Promise<ControlStore>): void {
  const base = makeOverride();

  it('has a default plan after migrating, and migrating again changes nothing', async () => {
    const store = await fresh();
    await store.close();
    await store.start();
    const plans = await store.listPlans();
    expect(plans.map((p) => p.name)).toEqual(['default']);
    expect(plans[0]).toMatchObject({ id: 'plan_default', monthlySpans: 100_000_000, rateLimitRps: 1000 });
    expect(typeof plans[0]?.createdAt).toBe('number');
  });

  it('resolves a key by its hash only, and not after revocation', async () => {
    const store = await fresh();
    await store.createOrg({ name: 'acme' });
    const created = await store.createKey({ orgName: 'acme', name: 'ci' });
    expect(created.key).toMatch(/^ti_[A-Za-z0-9_-]{43}$/);
    expect(created.prefix).toBe(created.key.slice(0, 12));
    const resolved = await store.resolveKeyHash(hashApiKey(created.key));
    expect(resolved).toEqual({
      keyId: created.id,
      prefix: created.prefix,
      orgId: created.orgId,
      orgName: 'acme',
      planName: 'default',
      monthlySpans: 100_000_000,
      rateLimitRps: 1000,
      contentPolicy: null,
      textDays: null,
      scopes: ['ingest'],
      customers: null,
    });
    const listed = await store.listKeys();
    expect(listed).toEqual([
      {
        id: created.id,
        orgId: created.orgId,
        orgName: 'acme',
        name: 'ci',
        prefix: created.prefix,
        createdAt: created.createdAt,
        revokedAt: null,
        scopes: ['ingest'],
        customers: null,
      },
    ]);
    // A key for the budget API alone, limited to named customers.
    const reader = await store.createKey({ orgName: 'acme', scopes: ['budget:read'], customers: ['alice@example.com', "o'brien"] });
    expect(await store.resolveKeyHash(hashApiKey(reader.key))).toMatchObject({ scopes: ['budget:read'], customers: ['alice@example.com', "o'brien"] });
    expect((await store.listKeys()).find((k) => k.id === reader.id)).toMatchObject({ scopes: ['budget:read'], customers: ['alice@example.com', "o'brien"] });
    expect(JSON.stringify(listed)).not.toContain(created.key);
    const revoked = await store.revokeKey(created.prefix);
    expect(typeof revoked.revokedAt).toBe('number');
    expect(await store.resolveKeyHash(hashApiKey(created.key))).toBeNull();
    // Revoking again keeps the first instant.
    expect((await store.revokeKey(created.id)).revokedAt).toBe(revoked.revokedAt);
    expect((await store.listKeys({ orgName: 'acme' }))[0]?.revokedAt).toBe(revoked.revokedAt);
  });

  it('moves an org to another plan at once', async () => {
    const store = await fresh();
    await store.createPlan({ name: 'tiny', monthlySpans: 10, rateLimitRps: 2 });
    await store.createOrg({ name: 'acme' });
    const k = await store.createKey({ orgName: 'acme' });
    await store.setOrgPlan('acme', 'tiny');
    expect(await store.resolveKeyHash(hashApiKey(k.key))).toMatchObject({ planName: 'tiny', monthlySpans: 10, rateLimitRps: 2 });
    expect(await store.updatePlan('tiny', { monthlySpans: 20 })).toMatchObject({ name: 'tiny', monthlySpans: 20, rateLimitRps: 2 });
    expect(await store.updatePlan('tiny', { rateLimitRps: 3 })).toMatchObject({ name: 'tiny', monthlySpans: 20, rateLimitRps: 3 });
    expect(await store.updatePlan('tiny', {})).toMatchObject({ name: 'tiny', monthlySpans: 20, rateLimitRps: 3 });
    expect(await store.resolveKeyHash(hashApiKey(k.key))).toMatchObject({ monthlySpans: 20, rateLimitRps: 3 });
    expect(await store.getOrg('acme')).toMatchObject({ planName: 'tiny' });
    expect((await store.listOrgs()).map((o) => [o.name, o.planName])).toEqual([['acme', 'tiny']]);
  });

  it('refuses duplicates, unknown names and bad numbers with clear errors', async () => {
    const store = await fresh();
    const org = await store.createOrg({ name: 'acme' });
    await expect(store.createOrg({ name: 'acme' })).rejects.toBeInstanceOf(ConflictError);
    await expect(store.createOrg({ name: 'acme' })).rejects.toThrow('org "acme" already exists');
    await expect(store.createOrg({ name: 'x', planName: 'nope' })).rejects.toThrow(/unknown plan "nope"/);
    await expect(store.createKey({ orgName: 'nope' })).rejects.toBeInstanceOf(UsageError);
    await expect(store.createKey({ orgName: 'nope' })).rejects.toThrow('unknown org "nope"');
    await expect(store.createPlan({ name: 'p', monthlySpans: -1, rateLimitRps: 1 })).rejects.toThrow(/>= 0/);
    await expect(store.createPlan({ name: 'p', monthlySpans: 1, rateLimitRps: 0 })).rejects.toThrow(/>= 1/);
    await expect(store.createPlan({ name: 'p', monthlySpans: 1.5, rateLimitRps: 1 })).rejects.toBeInstanceOf(UsageError);
    await expect(store.updatePlan('default', { rateLimitRps: 0 })).rejects.toThrow(/>= 1/);
    await expect(store.createPlan({ name: 'default', monthlySpans: 1, rateLimitRps: 1 })).rejects.toThrow(/plan "default" already exists/);
    await expect(store.updatePlan('nope', { monthlySpans: 1 })).rejects.toThrow(/unknown plan "nope"/);
    await expect(store.setOrgPlan('acme', 'nope')).rejects.toThrow(/unknown plan "nope"/);
    await expect(store.setOrgPlan('nope', 'default')).rejects.toThrow(/unknown org "nope"/);
    await expect(store.listKeys({ orgName: 'nope' })).rejects.toThrow(/unknown org "nope"/);
    await expect(store.revokeKey('ti_missing')).rejects.toThrow(/no API key/);
    expect(await store.getOrg(org.id)).toMatchObject({ name: 'acme' });
    expect(await store.getOrg('nope')).toBeNull();
  });

  it('says what is wrong without telling which command to run (the CLI adds that)', async () => {
    const store = await fresh();
    const failures = await Promise.allSettled([
      store.createOrg({ name: 'x', planName: 'nope' }),
      store.createKey({ orgName: 'nope' }),
      store.revokeKey('ti_missing'),
      store.createPlan({ name: 'default', monthlySpans: 1, rateLimitRps: 1 }),
    ]);
    const reasons = failures.map((f) => (f.status === 'rejected' ? (f.reason as Error) : undefined));
    expect(reasons[0]).toBeInstanceOf(UnknownNameError);
    expect(reasons[0]).toMatchObject({ what: 'plan', given: 'nope' });
    expect(reasons[1]).toMatchObject({ what: 'org', given: 'nope' });
    expect(reasons[2]).toMatchObject({ what: 'key', given: 'ti_missing' });
    expect(reasons[3]).toBeInstanceOf(AlreadyExistsError);
    for (const r of reasons) expect(r?.message).not.toMatch(/trace-ingest|"plans |"orgs |"keys /);
  });

  it('turns a race between two creators of one name into a ConflictError', async () => {
    const store = await fresh();
    const results = await Promise.allSettled([store.createOrg({ name: 'race' }), store.createOrg({ name: 'race' }), store.createOrg({ name: 'race' })]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ConflictError);
    const plans = await Promise.allSettled([1, 2].map(() => store.createPlan({ name: 'p', monthlySpans: 1, rateLimitRps: 1 })));
    expect(plans.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
  });

  it('refuses an ambiguous prefix', async () => {
    const store = await fresh();
    await store.createOrg({ name: 'acme' });
    const a = await store.createKey({ orgName: 'acme', key: 'ti_same_prefix_' + 'a'.repeat(20) });
    await store.createKey({ orgName: 'acme', key: 'ti_same_prefix_' + 'b'.repeat(20) });
    await expect(store.revokeKey('ti_same_pre')).rejects.toThrow(/no API key/);
    await expect(store.revokeKey('ti_same_pref')).rejects.toThrow(/matches 2 keys/);
    await expect(store.revokeKey('ti_same_pref')).rejects.toBeInstanceOf(AmbiguousKeyError);
    expect(await store.listKeys({ orgName: 'acme' })).toHaveLength(2);
    expect((await store.revokeKey(a.id)).id).toBe(a.id);
    // Two keys made in the same millisecond are listed in id order: look each one up by id.
    const listed = await store.listKeys();
    expect(listed.filter((k) => k.revokedAt !== null).map((k) => k.id)).toEqual([a.id]);
    expect(listed.filter((k) => k.revokedAt === null)).toHaveLength(1);
  });

  it('counts usage per org and month, across restarts', async () => {
    const store = await fresh();
    const org = await store.createOrg({ name: 'acme' });
    expect(await store.addMonthUsage(org.id, '2026-11', 5)).toBe(5);
    expect(await store.addMonthUsage(org.id, '2026-11', 7)).toBe(12);
    await store.close();
    await store.start();
    expect(await store.getMonthUsage(org.id, '2026-11')).toBe(12);
    expect(await store.getMonthUsage(org.id, '2026-12')).toBe(0);
  });

  it('sums concurrent usage exactly, each caller seeing a total that includes its spans', async () => {
    const store = await fresh();
    const org = await store.createOrg({ name: 'acme' });
    const totals = await Promise.all(Array.from({ length: 300 }, (_, i) => store.addMonthUsage(org.id, '2026-11', 1 + (i % 3))));
    const expected = Array.from({ length: 300 }, (_, i) => 1 + (i % 3)).reduce((a, b) => a + b, 0);
    expect(await store.getMonthUsage(org.id, '2026-11')).toBe(expected);
    expect(Math.min(...totals)).toBeGreaterThanOrEqual(1);
    expect(Math.max(...totals)).toBe(expected);
  });

  it('refuses a bad usage number, and a failed add does not hold up the next ones', async () => {
    const store = await fresh();
    const org = await store.createOrg({ name: 'acme' });
    await expect(store.addMonthUsage(org.id, '2026-11', 1.5)).rejects.toBeInstanceOf(UsageError);
    await expect(store.addMonthUsage(org.id, '2026-11', -1)).rejects.toThrow(/>= 0/);
    // Unknown org: the foreign key refuses it.
    await expect(Promise.all([store.addMonthUsage('org_missing', '2026-11', 1), store.addMonthUsage('org_missing', '2026-11', 2)])).rejects.toThrow();
    expect(await Promise.all([store.addMonthUsage(org.id, '2026-11', 1), store.addMonthUsage(org.id, '2026-11', 2)])).toContain(3);
  });

  it('counts each batch fingerprint once, concurrently and across restarts, until it is forgotten', async () => {
    const store = await fresh();
    const org = await store.createOrg({ name: 'acme' });
    const now = Date.UTC(2026, 10, 20);
    expect(
      await store.addMonthUsageOnce(
        org.id,
        '2026-11',
        [
          { id: 'a', spans: 5 },
          { id: 'b', spans: 2 },
        ],
        now,
      ),
    ).toBe(7);
    // Sent again, alone or beside a new batch, at once from several callers: only the new one counts.
    const again = await Promise.all(
      Array.from({ length: 20 }, () =>
        store.addMonthUsageOnce(
          org.id,
          '2026-11',
          [
            { id: 'a', spans: 5 },
            { id: 'c', spans: 3 },
          ],
          now,
        ),
      ),
    );
    expect(Math.max(...again)).toBe(10);
    expect(await store.addMonthUsageOnce(org.id, '2026-11', [], now)).toBe(10);
    await store.close();
    await store.start();
    expect(await store.addMonthUsageOnce(org.id, '2026-11', [{ id: 'b', spans: 2 }], now)).toBe(10);
    // Another org's batch of the same fingerprint is its own.
    const other = await store.createOrg({ name: 'other' });
    expect(await store.addMonthUsageOnce(other.id, '2026-11', [{ id: 'a', spans: 5 }], now)).toBe(5);
    // Remembered for USAGE_BATCH_MEMORY_MS: a resend later than that counts again.
    expect(await store.addMonthUsageOnce(org.id, '2026-11', [{ id: 'a', spans: 5 }], now + USAGE_BATCH_MEMORY_MS + 120_000)).toBe(15);
    expect(await store.addMonthUsageOnce(org.id, '2026-11', [{ id: 'a', spans: 5 }], now + USAGE_BATCH_MEMORY_MS + 120_000)).toBe(15);
  });

  it('accepts a supplied key once (headless init)', async () => {
    const store = await fresh();
    await store.createOrg({ name: 'acme' });
    const key = 'ti_' + 'a'.repeat(43);
    expect(await store.hasKeyHash(hashApiKey(key))).toBe(false);
    await store.createKey({ orgName: 'acme', key });
    expect(await store.hasKeyHash(hashApiKey(key))).toBe(true);
    await expect(store.createKey({ orgName: 'acme', key })).rejects.toBeInstanceOf(ConflictError);
    await expect(store.createKey({ orgName: 'acme', key: 'short' })).rejects.toBeInstanceOf(UsageError);
  });

  it('keeps price overrides and bumps their version on change', async () => {
    const store = await fresh();
    const v0 = await store.priceOverridesVersion();
    expect(v0).toBe('0');
    const first = await store.setPriceOverride(base);
    const second = await store.setPriceOverride({ ...base, inputPerMtok: '3', imageEach: '0.000001' });
    expect(second.id).not.toBe(first.id);
    const list = await store.listPriceOverrides();
    expect(list).toHaveLength(1);
    expect(list[0]).toEqual(second);
    expect(list[0]?.inputPerMtok).toBe('3');
    expect(await store.priceOverridesVersion()).toBe('2');
    await Promise.all([1, 2, 3].map((i) => store.setPriceOverride({ ...base, validFrom: i })));
    expect(await store.priceOverridesVersion()).toBe('5');
    expect((await store.listPriceOverrides()).map((o) => o.validFrom)).toEqual([0, 1, 2, 3]);
    expect(await store.unsetPriceOverride({ orgId: '', provider: '', model: 'my-model', validFrom: 2 })).toBe(1);
    expect(await store.unsetPriceOverride({ orgId: '', provider: '', model: 'my-model' })).toBe(3);
    expect(await store.unsetPriceOverride({ orgId: '', provider: '', model: 'my-model' })).toBe(0);
    expect(await store.priceOverridesVersion()).toBe('7');
  });

  it('keeps retention and content policy per org, handed to the hot path with the key', async () => {
    const store = await fresh();
    await store.createOrg({ name: 'acme' });
    const created = await store.createKey({ orgName: 'acme' });
    expect(await store.getOrg('acme')).toMatchObject({ retentionDays: null, textDays: null, contentPolicy: null });
    expect(await store.setOrgRetention('acme', { days: 90 })).toMatchObject({ retentionDays: 90, textDays: null });
    expect(await store.setOrgRetention('acme', { textDays: 7 })).toMatchObject({ retentionDays: 90, textDays: 7 });
    await store.setOrgContentPolicy('acme', '{"record":"no-text","rules":[],"custom":[]}');
    expect(await store.resolveKeyHash(hashApiKey(created.key))).toMatchObject({ textDays: 7, contentPolicy: '{"record":"no-text","rules":[],"custom":[]}' });
    expect(await store.setOrgRetention('acme', { days: null })).toMatchObject({ retentionDays: null, textDays: 7 });
    await expect(store.setOrgRetention('acme', { days: -1 })).rejects.toThrow(/from 0 \(keep forever\)/);
    await expect(store.setOrgRetention('nope', { days: 1 })).rejects.toBeInstanceOf(UnknownNameError);
  });

  it('keeps an audit log, newest first, per org', async () => {
    const store = await fresh();
    const a = await store.createOrg({ name: 'acme' });
    const b = await store.createOrg({ name: 'beta' });
    await store.appendAudit({ actor: 'ops@host', action: 'erase', orgId: a.id, target: 'customer sha256:ab', detail: '{"spans":3}', at: 1000 });
    await store.appendAudit({ actor: 'ops@host', action: 'set-retention', orgId: b.id, target: '', detail: '{}', at: 2000 });
    expect((await store.listAudit()).map((e) => e.action)).toEqual(['set-retention', 'erase']);
    expect(await store.listAudit({ orgId: a.id })).toEqual([
      expect.objectContaining({ actor: 'ops@host', action: 'erase', orgId: a.id, target: 'customer sha256:ab', detail: '{"spans":3}', at: 1000 }),
    ]);
    expect(await store.listAudit({ limit: 1 })).toHaveLength(1);
  });

  it('closes twice without error', async () => {
    const store = await fresh();
    await store.close();
    await store.close();
  });
}
