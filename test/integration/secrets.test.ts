import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { generateApiKey, hashApiKey } from '@trace-ingest/shared/ids';
import { IngestServer } from '@trace-ingest/server/server';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { makePayload, makeSpan, makeTrace } from '../factories.js';

/**
 * Secrets and isolation: a realistic mix of requests against a server that
 * logs everything (level trace, no redaction), then every log line, every
 * answer (status line, headers, body), the metrics and the raw SQLite files
 * are searched for every key the run used.
 */

const LIMIT = 64 * 1024;
const KEY_FORMAT = /^ti_[A-Za-z0-9_-]{43}$/;

interface Seen {
  what: string;
  status: number;
  text: string;
}

describe('secrets: API keys never leave the key holder', () => {
  let dir: string;
  let logFile: string;
  let logger: Logger;
  let keys: SqliteControlStore;
  let spanStore: DuckDbSpanStore;
  let server: IngestServer;
  let url: string;
  const used = new Set<string>();
  const seen: Seen[] = [];
  let good: { key: string; prefix: string; orgId: string };
  let other: { key: string; prefix: string; orgId: string };

  const newKey = async (org: string, plan?: string) => {
    if ((await keys.getOrg(org)) === null) await keys.createOrg({ name: org, ...(plan === undefined ? {} : { planName: plan }) });
    const k = await keys.createKey({ orgName: org });
    used.add(k.key);
    return { key: k.key, prefix: k.prefix, orgId: (await keys.getOrg(org))?.id ?? '' };
  };

  /** Sends and records the whole answer: status line, every header, the body. */
  const send = async (what: string, init: { path?: string; headers?: Record<string, string>; body?: string | Buffer; method?: string }): Promise<Seen> => {
    const res = await fetch(`${url}${init.path ?? '/ingest'}`, {
      method: init.method ?? 'POST',
      headers: { 'content-type': 'application/json', ...init.headers },
      ...(init.body === undefined ? {} : { body: init.body }),
    });
    const headers = [...res.headers.entries()].map(([k, v]) => `${k}: ${v}`).join('\n');
    const s = { what, status: res.status, text: `${res.status} ${res.statusText}\n${headers}\n\n${await res.text()}` };
    seen.push(s);
    return s;
  };
  const body = (p = makePayload()) => JSON.stringify(p);

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-secrets-'));
    logFile = path.join(dir, 'server.log');
    const config = loadConfig({
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dir,
      DRAIN_GRACE_MS: '0',
      FLUSH_INTERVAL_MS: '60000',
      INGEST_MAX_BODY_BYTES: String(LIMIT),
      LOG_LEVEL: 'trace',
    });
    // No redaction on purpose: the test proves no code path logs a key, not that a filter hides it.
    logger = pino({ level: 'trace' }, pino.destination({ dest: logFile, sync: true }));
    keys = new SqliteControlStore(config.sqliteFile);
    spanStore = new DuckDbSpanStore({ file: config.duckdbFile });
    server = new IngestServer(config, logger, { keyStore: keys, spanStore });
    await server.start();
    url = `http://127.0.0.1:${server.port}`;
    await keys.createPlan({ name: 'one-rps', monthlySpans: 1e9, rateLimitRps: 1 });
    await keys.createPlan({ name: 'one-span', monthlySpans: 1, rateLimitRps: 1000 });
    good = await newKey('org-a');
    other = await newKey('org-b');
  });

  afterAll(async () => {
    await server.shutdown();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs the mix: 202, 401 (unknown, malformed, revoked), 400 (two keys), 413, 400, 429 (rate and quota), 404, 405', async () => {
    const expectStatus = async (what: string, status: number, init: Parameters<typeof send>[1]) => {
      const s = await send(what, init);
      expect(s.status, `${what}: ${s.text.slice(0, 300)}`).toBe(status);
    };
    await expectStatus('good, bearer', 202, { headers: { authorization: `Bearer ${good.key}` }, body: body() });
    await expectStatus('good, x-api-key', 202, { headers: { 'x-api-key': good.key }, body: body() });
    await expectStatus('good, gzip', 202, {
      headers: { authorization: `Bearer ${good.key}`, 'content-encoding': 'gzip' },
      body: (await import('node:zlib')).gzipSync(body()),
    });

    const unknown = generateApiKey();
    used.add(unknown);
    await expectStatus('unknown key', 401, { headers: { authorization: `Bearer ${unknown}` }, body: body() });
    await expectStatus('unknown key, x-api-key', 401, { headers: { 'x-api-key': unknown }, body: body() });
    const malformed = `tk_${generateApiKey().slice(3)}`;
    used.add(malformed);
    await expectStatus('malformed key', 401, { headers: { authorization: `Bearer ${malformed}` }, body: body() });
    await expectStatus('two different keys', 400, { headers: { authorization: `Bearer ${good.key}`, 'x-api-key': other.key }, body: body() });
    await expectStatus('key in the query string only', 401, { path: `/ingest?api_key=${good.key}`, body: body() });
    await expectStatus('key as a Basic credential', 401, {
      headers: { authorization: `Basic ${Buffer.from(`u:${good.key}`).toString('base64')}` },
      body: body(),
    });

    const revoked = await newKey('org-a');
    await expectStatus('before revoking', 202, { headers: { authorization: `Bearer ${revoked.key}` }, body: body() });
    await keys.revokeKey(revoked.prefix);
    await expectStatus('revoked key', 401, { headers: { authorization: `Bearer ${revoked.key}` }, body: body() });

    await expectStatus('413 by declared length', 413, { headers: { authorization: `Bearer ${good.key}` }, body: 'x'.repeat(LIMIT + 1) });
    await expectStatus('400 not JSON', 400, { headers: { authorization: `Bearer ${good.key}` }, body: '{"version":' });
    await expectStatus('400 schema', 400, { headers: { authorization: `Bearer ${good.key}` }, body: JSON.stringify({ version: 'v1', traces: [] }) });
    // A client that puts its own key in a field of the payload gets it named in nothing but its own answer's paths; the value is never echoed.
    await expectStatus('400 with the key as a value', 400, {
      headers: { authorization: `Bearer ${good.key}` },
      body: JSON.stringify({ version: good.key, traces: [] }),
    });
    await expectStatus('400 content type', 400, { headers: { authorization: `Bearer ${good.key}`, 'content-type': 'text/plain' }, body: body() });

    const limited = await newKey('org-rate', 'one-rps');
    const first = await send('rate limit, first', { headers: { authorization: `Bearer ${limited.key}` }, body: body() });
    const second = await send('rate limit, second', { headers: { authorization: `Bearer ${limited.key}` }, body: body() });
    expect([first.status, second.status]).toContain(429);

    const quota = await newKey('org-quota', 'one-span');
    await expectStatus('quota, first', 202, { headers: { authorization: `Bearer ${quota.key}` }, body: body() });
    await expectStatus('quota, exceeded', 429, { headers: { authorization: `Bearer ${quota.key}` }, body: body() });

    await expectStatus('404', 404, { path: `/ingest/${good.prefix}`, headers: { authorization: `Bearer ${good.key}` }, body: body() });
    await expectStatus('405', 405, { method: 'GET', headers: { authorization: `Bearer ${good.key}` } });
    // A startTime past the Date range was once answered 500 (and its stack logged); it is refused with 400 now.
    const past = makePayload({ traces: [makeTrace({ spans: [makeSpan({ startTime: Number.MAX_SAFE_INTEGER, endTime: Number.MAX_SAFE_INTEGER })] })] });
    const s400 = await send('year 10000+', { headers: { authorization: `Bearer ${good.key}` }, body: JSON.stringify(past) });
    expect(s400.status).toBe(400);

    await send('metrics (not on this port)', { method: 'GET', path: '/metrics' });
    await send('readyz', { method: 'GET', path: '/readyz' });
    await server.flush();
  });

  it('logged the mix at level trace (the search below has something to search)', () => {
    const log = fs.readFileSync(logFile, 'utf8');
    const lines = log.split('\n').filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(15);
    // Key prefixes are logged by design (12 characters, not enough to use the key).
    expect(log).toContain(good.prefix);
    expect(log).toMatch(/"status":401/);
    expect(log).toMatch(/"status":429/);
  });

  it('has no key in any log line, answer, header or metric', async () => {
    const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    expect(metrics).toContain('trace_ingest_spans_accepted_total');
    const log = fs.readFileSync(logFile, 'utf8');
    expect(used.size).toBeGreaterThanOrEqual(7);
    const places: [string, string][] = [['log', log], ['metrics', metrics], ...seen.map((s): [string, string] => [`answer to ${s.what}`, s.text])];
    const leaks: string[] = [];
    for (const k of used) {
      // The secret part too, in case a prefix or a scheme were cut off.
      const needles = [k, k.slice(3), Buffer.from(k).toString('base64')];
      for (const [where, text] of places) for (const n of needles) if (text.includes(n)) leaks.push(`${k.slice(0, 6)}… in ${where}`);
    }
    expect(leaks).toEqual([]);
  });

  it('stores only SHA-256 hashes of keys in the SQLite files', () => {
    const files = fs.readdirSync(dir).filter((f) => f.startsWith('trace-ingest.sqlite'));
    expect(files).toContain('trace-ingest.sqlite');
    const raw = Buffer.concat(files.map((f) => fs.readFileSync(path.join(dir, f))));
    const text = raw.toString('latin1');
    const stored = [good, other].map((k) => k.key);
    for (const k of stored) {
      expect(text.includes(k), 'a key in SQLite').toBe(false);
      expect(text.includes(k.slice(12)), 'the secret part of a key in SQLite').toBe(false);
      expect(text.includes(Buffer.from(k, 'utf16le').toString('latin1')), 'a UTF-16 key in SQLite').toBe(false);
      expect(text.includes(hashApiKey(k)), 'the hash of a key').toBe(true);
    }
  });

  it('generates keys as ti_ + 43 base64url characters (256 random bits), all distinct', async () => {
    const generated = Array.from({ length: 5000 }, () => generateApiKey());
    const created = await Promise.all(Array.from({ length: 200 }, async () => (await keys.createKey({ orgName: 'org-a' })).key));
    for (const k of [...generated, ...created]) expect(k).toMatch(KEY_FORMAT);
    expect(new Set([...generated, ...created]).size).toBe(generated.length + created.length);
    // Every base64url symbol shows up at every position: the characters carry 6 random bits each.
    for (let pos = 3; pos < 45; pos += 7) expect(new Set(generated.map((k) => k[pos])).size).toBe(64);
    // The last symbol of 32 bytes in base64url carries 4 bits: 16 symbols.
    expect(new Set(generated.map((k) => k[45])).size).toBe(16);
    // Bits look unbiased: the share of set bits over all keys is close to one half.
    let ones = 0;
    let bits = 0;
    for (const k of generated) {
      for (const byte of Buffer.from(k.slice(3), 'base64url')) {
        for (let b = byte; b > 0; b >>= 1) ones += b & 1;
        bits += 8;
      }
    }
    expect(Math.abs(ones / bits - 0.5)).toBeLessThan(0.005);
  });

  describe('data isolation', () => {
    const orgFields = (orgId: string) => ({ orgId, org_id: orgId, organization: orgId, org: orgId });
    const post = (key: string, payload: unknown) => send('isolation', { headers: { authorization: `Bearer ${key}` }, body: JSON.stringify(payload) });

    it('refuses payload fields that name an org, at every level (strict schema)', async () => {
      const b = other.orgId;
      const attempts: unknown[] = [
        { ...makePayload(), ...orgFields(b) },
        makePayload({ traces: [{ ...makeTrace(), ...orgFields(b) }] }),
        makePayload({ traces: [makeTrace({ spans: [{ ...makeSpan(), ...orgFields(b) }] })] }),
        makePayload({ traces: [makeTrace({ customer: { id: 'c', ...orgFields(b) } as never })] }),
        JSON.parse(`{"__proto__":{"org_id":"${b}"},${body().slice(1)}`),
      ];
      for (const a of attempts) {
        const s = await post(good.key, a);
        expect(s.status, s.text.slice(0, 300)).toBe(400);
      }
    });

    it('writes rows only under the org of the key, whatever ids or metadata the payload carries', async () => {
      // org B writes first; then org A sends the same trace and span ids, and metadata naming B.
      const ids = { traceId: 'shared-trace', spanId: 'shared-span' };
      const sB = await post(
        other.key,
        makePayload({ traces: [makeTrace({ traceId: ids.traceId, traceName: 'from B', spans: [makeSpan({ spanId: ids.spanId, name: 'B' })] })] }),
      );
      expect(sB.status).toBe(202);
      const usageBefore = await keys.getMonthUsage(other.orgId, new Date().toISOString().slice(0, 7));
      const sA = await post(
        good.key,
        makePayload({
          traces: [
            makeTrace({
              traceId: ids.traceId,
              traceName: 'from A',
              metadata: orgFields(other.orgId),
              spans: [makeSpan({ spanId: ids.spanId, name: 'A', metadata: orgFields(other.orgId) })],
            }),
          ],
        }),
      );
      expect(sA.status).toBe(202);
      await server.flush();
      const rows = await spanStore.query('SELECT org_id, name, key_prefix FROM spans WHERE trace_id = ? ORDER BY org_id', [ids.traceId]);
      expect(rows.map((r) => [r.org_id, r.name, r.key_prefix]).sort()).toEqual(
        [
          [good.orgId, 'A', good.prefix],
          [other.orgId, 'B', other.prefix],
        ].sort(),
      );
      // Usage is counted for the key's org only.
      expect(await keys.getMonthUsage(other.orgId, new Date().toISOString().slice(0, 7))).toBe(usageBefore);
      // Every row of the run carries the org of the key that sent it, whichever key that was.
      const all = await spanStore.query('SELECT DISTINCT key_prefix, org_id FROM spans ORDER BY key_prefix', []);
      const orgOfPrefix = new Map((await keys.listKeys()).map((k) => [k.prefix, k.orgId]));
      expect(all.length).toBeGreaterThanOrEqual(5);
      expect(all.map((r) => [r.key_prefix, r.org_id])).toEqual(all.map((r) => [r.key_prefix, orgOfPrefix.get(String(r.key_prefix)) ?? 'no such key']));
    });
  });
});
