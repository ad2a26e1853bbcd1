import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { UsageError } from '@trace-ingest/shared/errors';
import { hashApiKey } from '@trace-ingest/shared/ids';
import type { ConsoleTokens } from '../../packages/store/src/console-tokens.js';
import { openConsoleTokens } from '../../packages/store/src/console-tokens.js';
import { PostgresControlStore } from '../../packages/store/src/control-store-postgres.js';
import { SqliteControlStore } from '../../packages/store/src/control-store-sqlite.js';
import type { ControlStore } from '@trace-ingest/store/control-store-types';

const DATABASE_URL = process.env.TI_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const RUN = `ti_ctok_${randomBytes(4).toString('hex')}`;
const schemas: string[] = [];

afterAll(async () => {
  if (schemas.length === 0) return;
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await admin.end();
});

/** A migrated key store and the console tokens beside it, closed when the test ends. */
async function open(
  kind: 'sqlite' | 'postgres',
): Promise<{ keys: ControlStore; tokens: ConsoleTokens; raw: () => Promise<Record<string, unknown>[]>; another: () => Promise<ConsoleTokens> }> {
  let keys: ControlStore;
  let where: { sqliteFile: string; databaseUrl?: string };
  let tokens: ConsoleTokens;
  let raw: () => Promise<Record<string, unknown>[]>;
  if (kind === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-ctok-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'k.sqlite');
    keys = new SqliteControlStore(file);
    await keys.start();
    where = { sqliteFile: file };
    tokens = await openConsoleTokens(where);
    const Database = (await import('better-sqlite3')).default;
    raw = () => {
      const db = new Database(file, { readonly: true });
      try {
        return Promise.resolve(db.prepare('SELECT * FROM console_tokens').all() as Record<string, unknown>[]);
      } finally {
        db.close();
      }
    };
  } else {
    const schema = `${RUN}_${schemas.length}`;
    schemas.push(schema);
    const url = `${DATABASE_URL}?schema=${schema}`;
    keys = new PostgresControlStore(url, { poolSize: 2 });
    await keys.start();
    where = { sqliteFile: '/nonexistent', databaseUrl: url };
    tokens = await openConsoleTokens(where);
    raw = async () => {
      const c = new pg.Client({ connectionString: DATABASE_URL });
      await c.connect();
      try {
        return (await c.query(`SELECT * FROM "${schema}".console_tokens`)).rows as Record<string, unknown>[];
      } finally {
        await c.end();
      }
    };
  }
  onTestFinished(async () => {
    await tokens.close();
    await keys.close();
  });
  await tokens.start();
  const another = async () => {
    const t = await openConsoleTokens(where);
    onTestFinished(() => t.close());
    await t.start();
    return t;
  };
  return { keys, tokens, raw, another };
}

describe.each(['sqlite', 'postgres'] as const)('console tokens (%s)', (kind) => {
  it('stores only the hash, resolves a token to its grant, and refuses it once revoked', async () => {
    const { keys, tokens, raw } = await open(kind);
    const org = await keys.createOrg({ name: 'acme' });
    const all = await tokens.create({ name: 'finance', orgId: null, orgName: null });
    const one = await tokens.create({ name: 'acme-pm', orgId: org.id, orgName: 'acme' });
    expect(all.token).toMatch(/^tic_[A-Za-z0-9_-]{43}$/);
    expect(all.prefix).toBe(all.token.slice(0, 12));

    const stored = JSON.stringify(await raw());
    expect(stored).not.toContain(all.token);
    expect(stored).toContain(hashApiKey(all.token));

    expect(await tokens.resolve(all.token)).toEqual({ tokenId: all.id, orgId: null });
    expect(await tokens.resolve(one.token)).toEqual({ tokenId: one.id, orgId: org.id });
    expect(await tokens.resolve(all.token + 'x')).toBeNull();
    expect(await tokens.resolve('not-a-token')).toBeNull();

    const listed = await tokens.list();
    expect(listed.map((t) => [t.name, t.orgName, t.revokedAt])).toEqual([
      ['finance', null, null],
      ['acme-pm', 'acme', null],
    ]);
    expect(JSON.stringify(listed)).not.toContain(all.token);

    const revoked = await tokens.revoke(all.prefix);
    expect(revoked.revokedAt).toBeGreaterThan(0);
    expect(await tokens.resolve(all.token)).toBeNull();
    expect(await tokens.resolve(one.token)).not.toBeNull();
    // Revoking again keeps the first revocation time.
    expect((await tokens.revoke(all.id)).revokedAt).toBe(revoked.revokedAt);
  });

  it('says what to do when revoking an unknown token', async () => {
    const { tokens } = await open(kind);
    await expect(tokens.revoke('tic_nope')).rejects.toThrow(UsageError);
    await expect(tokens.revoke('tic_nope')).rejects.toThrow(/console token list/);
  });

  it('sees a revocation made through another connection on the next lookup', async () => {
    const { tokens, another } = await open(kind);
    const t = await tokens.create({ orgId: null, orgName: null });
    expect(await tokens.resolve(t.token)).not.toBeNull();
    // A second handle, as the CLI holds while the server runs.
    await (await another()).revoke(t.id);
    expect(await tokens.resolve(t.token)).toBeNull();
  });
});
