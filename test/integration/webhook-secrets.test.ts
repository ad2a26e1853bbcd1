import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { budgetEvents, rotateSecret, setBudget } from '@trace-ingest/cli/actions/budgets';
import { migrate } from '@trace-ingest/cli/actions/migrate';
import { makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';
import { verifySignature } from './support/webhook.js';

/**
 * Webhook secrets sealed at rest (an earlier version's plain text sealed by
 * migrate), rotated with an overlap, alerts signed over a timestamp, and no
 * redirect followed.
 */

interface Got {
  path: string;
  header: string;
  body: Buffer;
}

async function receiver(redirectTo?: string) {
  const got: Got[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ path: req.url ?? '', header: String(req.headers['x-trace-ingest-signature']), body: Buffer.concat(chunks) });
      if (redirectTo !== undefined && req.url === '/hook') res.writeHead(302, { location: redirectTo }).end();
      else res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  onTestFinished(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url: `${base}/hook`, base, got };
}

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function spend(traceId: string, usd: number) {
  const now = Date.now();
  return {
    version: 'v1',
    traces: [
      makeTrace({
        traceId,
        spans: [makeSpan({ startTime: now - 1000, endTime: now, provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: usd * 400_000 } })],
      }),
    ],
  };
}

/** Every byte of the SQLite files, as text: a secret stored in the clear would be in it. */
const sqliteText = (t: TestServer) =>
  fs
    .readdirSync(t.dir)
    .filter((f) => f.startsWith('trace-ingest.sqlite'))
    .map((f) => fs.readFileSync(`${t.dir}/${f}`).toString('latin1'))
    .join('');

describe('webhook secrets and signatures', () => {
  let t: TestServer;
  let ctx: CliContext;
  beforeAll(async () => {
    t = await startTestServer({ BUDGET_CHECK_MS: '100', WEBHOOK_TIMEOUT_MS: '1000', FLUSH_INTERVAL_MS: '50' });
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });

  it('keeps secrets sealed in the control store, signs over a timestamp, and after a rotation signs with both secrets', async () => {
    const { key } = await t.newKey('acme');
    const hook = await receiver();
    const set = await setBudget(ctx, { org: 'acme', monthlyUsd: '10', alertAt: '10,90', webhook: hook.url });
    const secret = set.secret ?? '';
    expect(secret).toMatch(/^whsec_/);
    expect(sqliteText(t)).not.toContain(secret.slice(6));
    expect(fs.statSync(`${t.dir}/secrets.key`).mode & 0o777).toBe(0o600);

    expect((await t.post(spend('w1', 2), { key })).status).toBe(202);
    await until('the 10% alert', () => hook.got.length >= 1);
    const [first] = hook.got;
    expect(first?.header).toMatch(/^t=\d{10},v1=[0-9a-f]{64}$/);
    expect(verifySignature(first?.header ?? '', first?.body ?? Buffer.alloc(0), secret)).toBe(true);
    // The same delivery replayed later than the tolerance is refused by the recipe.
    expect(verifySignature(first?.header ?? '', first?.body ?? Buffer.alloc(0), secret, Date.now() + 301_000)).toBe(false);

    const rotated = await rotateSecret(ctx, { org: 'acme', overlapHours: 1 });
    expect(rotated.secret).not.toBe(secret);
    expect(sqliteText(t)).not.toContain(rotated.secret.slice(6));
    expect((await t.post(spend('w2', 8), { key })).status).toBe(202);
    await until('the 90% alert', () => hook.got.length >= 2);
    const second = hook.got[1];
    expect(second?.header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    for (const s of [secret, rotated.secret]) expect(verifySignature(second?.header ?? '', second?.body ?? Buffer.alloc(0), s)).toBe(true);
  });

  it('does not follow a redirect: the alert is not delivered elsewhere, and budgets events says why', async () => {
    const { key } = await t.newKey('redirected');
    const elsewhere = await receiver();
    const hook = await receiver(`${elsewhere.base}/stolen`);
    await setBudget(ctx, { org: 'redirected', monthlyUsd: '1', alertAt: '50', webhook: hook.url });
    expect((await t.post(spend('r1', 1), { key })).status).toBe(202);
    await until('a failed delivery', async () => ((await budgetEvents(ctx, { org: 'redirected' }))[0]?.lastError ?? '') !== '');
    const [event] = await budgetEvents(ctx, { org: 'redirected' });
    expect(event?.lastError).toMatch(/redirect \(302\)/);
    expect(elsewhere.got).toEqual([]);
  });

  it('seals secrets an earlier version stored in plain text, and alerts stay signed with them', async () => {
    const { key } = await t.newKey('legacy');
    const hook = await receiver();
    await setBudget(ctx, { org: 'legacy', monthlyUsd: '10', alertAt: '50', webhook: hook.url });
    // As an earlier version left it: the secret in the clear.
    const plain = `whsec_${'p'.repeat(43)}`;
    const db = new Database(t.config.sqliteFile);
    db.prepare("UPDATE budgets SET webhook_secret = ? WHERE org_id = (SELECT id FROM orgs WHERE name = 'legacy')").run(plain);
    db.close();
    expect(sqliteText(t)).toContain(plain);
    expect((await migrate(ctx)).sealedSecrets).toBe(1);
    const check = new Database(t.config.sqliteFile, { readonly: true });
    const stored = check.prepare("SELECT webhook_secret AS s FROM budgets WHERE org_id = (SELECT id FROM orgs WHERE name = 'legacy')").get() as { s: string };
    check.close();
    expect(stored.s).toMatch(/^enc:v1:[0-9a-f]{8}:/);
    expect((await t.post(spend('l1', 6), { key })).status).toBe(202);
    await until('the alert', () => hook.got.length >= 1);
    expect(verifySignature(hook.got[0]?.header ?? '', hook.got[0]?.body ?? Buffer.alloc(0), plain)).toBe(true);
  });
});
