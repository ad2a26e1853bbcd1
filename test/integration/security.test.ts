import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { ROUTES, type Route } from '@trace-ingest/shared/routes';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { setBudget } from '@trace-ingest/cli/actions/budgets';
import { createConsoleToken } from '@trace-ingest/cli/actions/console';
import { auditList, erase } from '@trace-ingest/cli/actions/lifecycle';
import { makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * Who can reach what, on a real server (SQLite, DuckDB, real HTTP): every
 * route of every listener against the README's route-by-credential table,
 * each refusing no credential, a key of the wrong scope and another org's
 * console token; nothing on the ingest port naming a customer to a caller
 * without budget:read.
 */

const ALICE = 'alice@example.com';
const README = fs.readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const day = new Date().toISOString().slice(0, 10);

/** The rows of the README's route table: listener, method, path, credential. */
function readmeRoutes(): string[] {
  const section = README.slice(README.indexOf('### Who can reach what'));
  return section
    .slice(0, section.indexOf('\n#'))
    .split('\n')
    .filter((l) => /^\| (ingest|metrics|console|admin) /.test(l))
    .map((l) => {
      const [listener, route, credential] = l
        .split('|')
        .slice(1, 4)
        .map((c) => c.trim().replaceAll('`', ''));
      return `${listener} ${route} ${credential}`;
    });
}

/** A request with headers exactly as given (two of one name included), over a socket of its own. */
function rawRequest(port: number, lines: string[]): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let data = '';
    s.on('data', (c: Buffer) => (data += c.toString()));
    s.on('end', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1]), body: data.slice(data.indexOf('\r\n\r\n') + 4) }));
    s.on('error', reject);
    s.end(`${lines.join('\r\n')}\r\nConnection: close\r\n\r\n`);
  });
}

describe('who can reach what: every route and port (SQLite, DuckDB)', () => {
  let t: TestServer;
  let ctx: CliContext;
  let ingestKey = '';
  let budgetKey = '';
  let aliceKey = '';
  let acmeToken = '';
  let otherToken = '';
  const logLines: Record<string, unknown>[] = [];

  beforeAll(async () => {
    const sink = { write: (l: string) => void logLines.push(JSON.parse(l) as Record<string, unknown>) };
    t = await startTestServer({ CONSOLE_PORT: '0', BUDGET_CHECK_MS: '100', LOG_LEVEL: 'info' }, {}, undefined, pino({ level: 'info' }, sink));
    ingestKey = (await t.newKey('acme')).key;
    budgetKey = (await t.newKey('acme', undefined, ['budget:read'])).key;
    aliceKey = (await t.keys.createKey({ orgName: 'acme', scopes: ['budget:read'], customers: [ALICE] })).key;
    await t.newKey('other');
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    await setBudget(ctx, { org: 'acme', customer: ALICE, monthlyUsd: '5' });
    acmeToken = (await createConsoleToken(ctx, { org: 'acme' })).token;
    otherToken = (await createConsoleToken(ctx, { org: 'other' })).token;
    const now = Date.now();
    const batch = {
      version: 'v1',
      traces: [
        makeTrace({
          traceId: 'sec-1',
          customer: { id: ALICE },
          spans: [makeSpan({ startTime: now - 100, endTime: now, provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: 1000 } })],
        }),
      ],
    };
    expect((await t.post(batch, { key: ingestKey })).status).toBe(202);
    await t.server.flush();
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });

  const base = (r: Route): string => (r.listener === 'ingest' ? t.url : r.listener === 'metrics' ? t.metricsUrl : `http://127.0.0.1:${t.server.consolePort}`);
  const concrete = (p: string) =>
    p.replace(':traceId', 'sec-1').replace('/*', '/') + (p.startsWith('/console/api/') && p !== '/console/api/orgs' ? `?org=acme&from=${day}&to=${day}` : '');
  const send = (r: Route, headers: Record<string, string> = {}) =>
    fetch(`${base(r)}${concrete(r.path)}`, {
      method: r.method,
      headers: { 'content-type': 'application/json', ...headers },
      ...(r.method === 'POST' ? { body: JSON.stringify({ version: 'v1', traces: [makeTrace()] }) } : {}),
    });

  it("the README's route table is every route the listeners serve, with the credential each needs", () => {
    const served = t.server.routes().map((r) => `${r.listener} ${r.method} ${r.path}`);
    expect([...new Set(served)].sort()).toEqual(ROUTES.map((r) => `${r.listener} ${r.method} ${r.path}`).sort());
    expect(readmeRoutes().sort()).toEqual(ROUTES.map((r) => `${r.listener} ${r.method} ${r.path} ${r.credential}`).sort());
  });

  it('refuses every route that needs a credential when none is sent, and serves the others', async () => {
    for (const r of ROUTES.filter((x) => x.listener !== 'admin')) {
      const res = await send(r);
      const open = r.credential === 'none' || (r.credential === 'metrics token' && t.config.metricsToken === undefined);
      if (open) expect(res.status, `${r.method} ${r.path}`).toBeLessThan(400);
      else {
        expect(res.status, `${r.method} ${r.path}`).toBe(401);
        expect(((await res.json()) as { error: string }).error).toBeTruthy();
      }
    }
  });

  it('refuses a key of the wrong scope, naming the scope: 401 on /ingest (the contract), 403 elsewhere', async () => {
    const ingest = await send(ROUTES.find((r) => r.path === '/ingest') as Route, { authorization: `Bearer ${budgetKey}` });
    expect(ingest.status).toBe(401);
    expect(await ingest.json()).toMatchObject({ code: 'TI_ERR_FORBIDDEN', error: expect.stringContaining('"ingest" scope') });
    const otlp = await send(ROUTES.find((r) => r.path === '/v1/traces') as Route, { authorization: `Bearer ${budgetKey}` });
    expect(otlp.status).toBe(403);
    expect(await otlp.json()).toMatchObject({ code: 7, error: expect.stringContaining('"ingest" scope') });
    const budget = await fetch(`${t.url}/v1/budget?customer=${encodeURIComponent(ALICE)}`, { headers: { authorization: `Bearer ${ingestKey}` } });
    expect(budget.status).toBe(403);
    const text = await budget.text();
    expect(text).toContain('\\"budget:read\\" scope');
    expect(text).not.toContain(ALICE);
  });

  it('refuses another org with a console token limited to one org, on every console route', async () => {
    for (const r of ROUTES.filter((x) => x.credential === 'console token')) {
      const res = await send(r, { authorization: `Bearer ${otherToken}` });
      if (r.path === '/console/api/orgs') {
        expect(res.status).toBe(200);
        expect(JSON.stringify(await res.json())).not.toContain('acme');
      } else {
        expect(res.status, r.path).toBe(404);
        expect(await res.text()).not.toContain(ALICE);
      }
      expect((await send(r, { authorization: `Bearer ${acmeToken}` })).status, r.path).toBe(200);
    }
  });

  it('names no customer on the ingest port to a caller without budget:read: no answer, and no metric there', async () => {
    const answers: string[] = [];
    for (const r of ROUTES.filter((x) => x.listener === 'ingest')) {
      for (const headers of [{}, { authorization: `Bearer ${ingestKey}` }] as Record<string, string>[]) answers.push(await (await send(r, headers)).text());
    }
    answers.push(await (await fetch(`${t.url}/metrics`)).text());
    answers.push(await (await fetch(`${t.url}/v1/budget?customer=${encodeURIComponent(ALICE)}`, { headers: { 'x-api-key': ingestKey } })).text());
    expect(answers.filter((a) => a.includes(ALICE))).toEqual([]);
    // The metrics listener names no customer either unless METRICS_CUSTOMER_LABELS is on.
    await t.server.flush();
    expect(await (await fetch(`${t.metricsUrl}/metrics`)).text()).not.toContain(ALICE);
    // With budget:read the budget API answers; a key limited to alice reads alice only, never the org.
    expect((await fetch(`${t.url}/v1/budget`, { headers: { authorization: `Bearer ${budgetKey}` } })).status).toBe(200);
    const own = await fetch(`${t.url}/v1/budget?customer=${encodeURIComponent(ALICE)}`, { headers: { authorization: `Bearer ${aliceKey}` } });
    const body = (await own.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ customer: { id: ALICE, budgetUsd: '5' } });
    expect(body.org).toBeUndefined();
    for (const q of ['', '?customer=bob'])
      expect((await fetch(`${t.url}/v1/budget${q}`, { headers: { authorization: `Bearer ${aliceKey}` } })).status).toBe(403);
  });

  it('refuses a credential sent twice, or two different ones, with 400 on every listener', async () => {
    const twice = (port: number, p: string, method = 'GET') =>
      rawRequest(port, [`${method} ${p} HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Authorization: Bearer ${ingestKey}`, `Authorization: Bearer ${budgetKey}`]);
    const ingestPort = Number(new URL(t.url).port);
    expect((await twice(ingestPort, '/v1/budget')).status).toBe(400);
    expect((await twice(ingestPort, '/ingest', 'POST')).status).toBe(400);
    expect((await twice(t.server.consolePort, '/console/api/orgs')).status).toBe(400);
    const keys2 = await rawRequest(ingestPort, ['GET /v1/budget HTTP/1.1', 'Host: x', `x-api-key: ${budgetKey}`, `x-api-key: ${ingestKey}`]);
    expect(keys2.status).toBe(400);
    expect(keys2.body).toContain('TI_ERR_AMBIGUOUS_CREDENTIALS');
  });

  it('keeps the admin socket to its owner (0600), and audits an erase posted to it by hand', async () => {
    const st = fs.statSync(t.config.adminSocket);
    expect(st.mode & 0o777).toBe(0o600);
    expect(st.uid).toBe(process.getuid?.());
    const body = JSON.stringify({ orgId: (await t.keys.getOrg('acme'))?.id, kind: 'trace', id: 'no-such-trace' });
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          socketPath: t.config.adminSocket,
          method: 'POST',
          path: '/v1/erase',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(status).toBe(200);
    const [entry] = await auditList(ctx, { org: 'acme', limit: 1 });
    expect(entry).toMatchObject({ action: 'erase', actor: expect.stringMatching(/\(admin socket\)$/), target: expect.stringMatching(/^trace sha256:/) });
  });

  it('checks the console Host header and logs console API requests without the token', async () => {
    const port = t.server.consolePort;
    const evil = await rawRequest(port, ['GET /console/api/orgs HTTP/1.1', 'Host: evil.example', `Authorization: Bearer ${acmeToken}`]);
    expect(evil.status).toBe(421);
    expect(evil.body).toContain('CONSOLE_ALLOWED_HOSTS');
    const ok = await rawRequest(port, ['GET /console/api/orgs HTTP/1.1', `Host: localhost:${port}`, `Authorization: Bearer ${acmeToken}`]);
    expect(ok.status).toBe(200);
    const trace = await fetch(`http://127.0.0.1:${port}/console/api/traces/sec-1?org=acme`, { headers: { authorization: `Bearer ${acmeToken}` } });
    expect(trace.status).toBe(200);
    const lines = logLines.filter((l) => l.msg === 'console request');
    expect(lines.filter((l) => l.route === '/console/api/orgs').length).toBeGreaterThan(0);
    expect(lines.find((l) => l.route === '/console/api/traces/:traceId' && l.status === 200)).toMatchObject({
      method: 'GET',
      tokenPrefix: acmeToken.slice(0, 12),
      durationMs: expect.any(Number),
    });
    const logged = JSON.stringify(logLines);
    for (const secret of [acmeToken, otherToken, ingestKey, budgetKey, aliceKey]) expect(logged).not.toContain(secret);
    expect(logged).not.toContain('sec-1');
  });
});

describe('failed authentications are limited per client address, on every port', () => {
  it('answers 429 with Retry-After past the limit, to a valid key too, and counts it in the metrics', async () => {
    const t = await startTestServer({ CONSOLE_PORT: '0', AUTH_FAILURE_LIMIT: '5' });
    onTestFinished(() => t.close());
    const { key } = await t.newKey('acme');
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await t.post({ version: 'v1', traces: [makeTrace()] }, { key: `ti_${String(i).padStart(43, 'x')}` })).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429]);
    const blocked = await t.post({ version: 'v1', traces: [makeTrace()] }, { key });
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await blocked.json()).toMatchObject({ code: 'TI_ERR_AUTH_LIMITED' });
    // The same address on the console port: refused there too.
    const consoleRes = await fetch(`http://127.0.0.1:${t.server.consolePort}/console/api/orgs`, { headers: { authorization: `Bearer tic_${'y'.repeat(43)}` } });
    expect(consoleRes.status).toBe(429);
    const metrics = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^trace_ingest_auth_failures_total\{listener="ingest"\} 5$/m);
    expect(metrics).toMatch(/^trace_ingest_auth_limited_total\{listener="ingest"\} 4$/m);
    expect(metrics).toMatch(/^trace_ingest_auth_limited_total\{listener="console"\} 1$/m);
  });
});

describe('/metrics', () => {
  it('needs its bearer token when one is set, and counts wrong ones as failed authentications', async () => {
    const token = 'm'.repeat(32);
    const t = await startTestServer({ METRICS_TOKEN: token });
    onTestFinished(() => t.close());
    expect((await fetch(`${t.metricsUrl}/metrics`)).status).toBe(401);
    expect((await fetch(`${t.metricsUrl}/metrics`, { headers: { authorization: `Bearer ${'n'.repeat(32)}` } })).status).toBe(401);
    const ok = await fetch(`${t.metricsUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toMatch(/^trace_ingest_auth_failures_total\{listener="metrics"\} 1$/m);
    expect((await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(404);
  });

  it('refuses to start listening beyond loopback without a token', () => {
    expect(() => loadConfig({ METRICS_HOST: '0.0.0.0' })).toThrow(/METRICS_HOST 0\.0\.0\.0 serves \/metrics beyond this machine: set METRICS_TOKEN_FILE/);
    expect(loadConfig({ METRICS_HOST: '0.0.0.0', METRICS_TOKEN: 'x'.repeat(20) }).metricsToken).toBe('x'.repeat(20));
  });

  it('names customers only when allowed, and an erased customer is gone at once', async () => {
    const t = await startTestServer({ METRICS_CUSTOMER_LABELS: 'true', BUDGET_CHECK_MS: '100' });
    onTestFinished(() => t.close());
    const { key } = await t.newKey('acme');
    const ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    onTestFinished(() => ctx.close());
    await setBudget(ctx, { org: 'acme', customer: ALICE, monthlyUsd: '5' });
    const now = Date.now();
    const batch = { version: 'v1', traces: [makeTrace({ customer: { id: ALICE }, spans: [makeSpan({ startTime: now - 10, endTime: now })] })] };
    expect((await t.post(batch, { key })).status).toBe(202);
    await t.server.flush();
    const named = async () => (await (await fetch(`${t.metricsUrl}/metrics`)).text()).includes(`customer="${ALICE}"`);
    for (let i = 0; i < 100 && !(await named()); i++) await new Promise((r) => setTimeout(r, 50));
    expect(await named()).toBe(true);
    await erase(ctx, { org: 'acme', kind: 'customer', id: ALICE, dryRun: false });
    expect(await named()).toBe(false);
    await new Promise((r) => setTimeout(r, 300));
    expect(await named()).toBe(false);
    const [entry] = await auditList(ctx, { org: 'acme', limit: 1 });
    expect(entry).toMatchObject({ action: 'erase', target: expect.stringMatching(/^customer sha256:/) });
    expect(JSON.stringify(entry)).not.toContain(ALICE);
  });
});

describe('console listening beyond loopback', () => {
  it('warns at start that it serves plain HTTP, and answers only the hosts it is given', async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) };
    const t = await startTestServer(
      { CONSOLE_PORT: '0', CONSOLE_HOST: '0.0.0.0', CONSOLE_ALLOWED_HOSTS: 'costs.example.com', LOG_LEVEL: 'info' },
      {},
      undefined,
      pino({ level: 'info' }, sink),
    );
    onTestFinished(() => t.close());
    expect(lines.find((l) => l.level === 40 && String(l.msg).includes('plain HTTP'))).toBeDefined();
    const port = t.server.consolePort;
    expect((await rawRequest(port, ['GET /console/api/orgs HTTP/1.1', 'Host: costs.example.com'])).status).toBe(401);
    expect((await rawRequest(port, ['GET /console/api/orgs HTTP/1.1', 'Host: 127.0.0.1'])).status).toBe(401);
    expect((await rawRequest(port, ['GET /console/api/orgs HTTP/1.1', 'Host: 192.0.2.1'])).status).toBe(421);
    expect(path.basename(t.dir)).toBeTruthy();
  });
});
