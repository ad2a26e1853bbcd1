import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { parseDatabaseUrl } from '@trace-ingest/store/control-store-postgres';
import { makeSpan, makeTrace } from '../factories.js';
import { postTraces, startChildServerForTest } from './support/child-server.js';
import { startClickHouse } from './support/clickhouse-server.js';

/** Every character that breaks a password written into a URL, and `%`, which a decoder would eat. */
const PASSWORD = 'p@ss:w/rd#?%41 &x';
const KEY = `ti_${'p'.repeat(43)}`;

describe('passwords given apart from their URLs (CLICKHOUSE_PASSWORD, DATABASE_PASSWORD)', () => {
  it('reaches a ClickHouse server whose password has @ : / # ? % in it', async () => {
    const ch = await startClickHouse({ password: PASSWORD });
    onTestFinished(() => ch.dispose());
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-passwords-'));
    onTestFinished(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const t = await startChildServerForTest({
      DATA_DIR: dataDir,
      CLICKHOUSE_URL: `http://default@127.0.0.1:${ch.httpPort}/ti_passwords`,
      CLICKHOUSE_PASSWORD: PASSWORD,
      TRACE_INGEST_INIT_API_KEY: KEY,
      FLUSH_INTERVAL_MS: '50',
    });
    const res = await postTraces(t.url, KEY, [makeTrace({ spans: [makeSpan()] })]);
    expect(res.status).toBe(202);
    const auth = { authorization: `Basic ${Buffer.from(`default:${PASSWORD}`).toString('base64')}` };
    let n = '';
    for (let i = 0; i < 200 && n !== '1'; i++) {
      const q = await fetch(`http://127.0.0.1:${ch.httpPort}/?query=${encodeURIComponent('SELECT count() FROM ti_passwords.spans')}`, { headers: auth });
      n = (await q.text()).trim();
      if (n !== '1') await new Promise((r) => setTimeout(r, 50));
    }
    expect(n).toBe('1');
  });

  it('gives PostgreSQL the password unchanged, and keeps it out of a configuration error', () => {
    const c = loadConfig({ DATABASE_URL: 'postgres://trace@db:5432/trace_ingest?schema=s', DATABASE_PASSWORD: PASSWORD });
    const u = new URL(parseDatabaseUrl(c.DATABASE_URL ?? '').url);
    expect(decodeURIComponent(u.password)).toBe(PASSWORD);
    expect(u.username).toBe('trace');
    expect(() => loadConfig({ DATABASE_PASSWORD: PASSWORD, PORT: 'x' })).toThrow(/PORT/);
    expect(() => loadConfig({ CLICKHOUSE_URL: 'not a url', CLICKHOUSE_PASSWORD: PASSWORD })).not.toThrow(PASSWORD);
  });
});
