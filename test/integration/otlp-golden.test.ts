import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OtlpCodec, type OtlpFormat } from '@trace-ingest/server/otlp-codec';
import { CONVENTIONS } from '@trace-ingest/shared/otlp-conventions';
import { startTestServer, type TestServer } from './support/ingest-server.js';
import { expectedRowsOf, familyFixtures, loadFixtures as load, OTLP_FIXTURES as DIR, usageFixtures } from './support/otlp-documents.js';

/**
 * Golden OTLP JSON documents: one per alias family of
 * the usage attributes (`<family>.golden.json` beside its module in
 * packages/shared/src/otlp/conventions/), with the rows and exact costs they must leave, and
 * one per answer of POST /v1/traces, each sent as OTLP JSON and, where it
 * applies, as the protobuf encoding of the same document.
 */

const codec = new OtlpCodec();

interface ErrorFixture {
  description: string;
  setup: 'none' | 'quota' | 'rate' | 'limit' | 'draining' | 'keystore-closed';
  formats: OtlpFormat[];
  request: {
    body?: unknown;
    bodyText?: string;
    method?: string;
    auth?: 'key' | 'none' | 'unknown';
    contentType?: string;
    contentEncoding?: string;
    compress?: boolean;
    padAttributeChars?: number;
  };
  expect: { status: number; grpcCode?: number; retryAfter?: boolean; message?: string; rejectedSpans?: number; rows?: number };
}

const CONTENT_TYPE: Record<OtlpFormat, string> = { json: 'application/json', protobuf: 'application/x-protobuf' };

function encode(doc: unknown, format: OtlpFormat): Buffer {
  return format === 'json' ? Buffer.from(JSON.stringify(doc)) : codec.encodeRequestFromJson(doc);
}

async function decodeAnswer(res: Response, format: OtlpFormat): Promise<Record<string, unknown>> {
  const bytes = Buffer.from(await res.arrayBuffer());
  const type = res.headers.get('content-type') ?? '';
  if (format === 'json' || type.startsWith('application/json')) {
    expect(type).toMatch(/^application\/json/);
    return JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
  }
  expect(type).toMatch(/^application\/x-protobuf/);
  return res.status === 200 ? codec.decodeResponse(bytes) : codec.decodeStatus(bytes);
}

describe('golden OTLP documents: usage alias families', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => t.close());

  const usage = usageFixtures();
  it('has a golden document for every registered family', () => {
    expect(familyFixtures().map(([n]) => n)).toEqual(CONVENTIONS.map((c) => c.name).sort());
  });
  for (const [name, fx] of usage) {
    for (const format of ['json', 'protobuf'] as const) {
      it(`${name} (${format}): ${fx.description.slice(0, 80)}`, async () => {
        const { key, orgId } = await t.newKey();
        const res = await fetch(`${t.url}/v1/traces`, {
          method: 'POST',
          headers: { 'content-type': CONTENT_TYPE[format], 'x-api-key': key },
          body: encode(fx.request, format),
        });
        expect(res.status).toBe(200);
        expect(await decodeAnswer(res, format)).toEqual({});
        const rows = await t.spans('SELECT * FROM spans WHERE org_id = ? ORDER BY span_id', [orgId]);
        expect(rows).toHaveLength(fx.expect.rows.length);
        const { got, want } = expectedRowsOf(fx, rows);
        expect(got).toEqual(want);
      });
    }
  }
});

describe('golden OTLP documents: every answer of POST /v1/traces', () => {
  const servers = new Map<string, TestServer>();
  async function serverFor(setup: ErrorFixture['setup']): Promise<TestServer> {
    const kind = setup === 'limit' ? 'limit' : setup === 'draining' || setup === 'keystore-closed' ? `${setup}-${servers.size}` : 'plain';
    let t = servers.get(kind);
    if (t === undefined) {
      t = await startTestServer(setup === 'limit' ? { INGEST_MAX_BODY_BYTES: String(64 * 1024) } : setup === 'draining' ? { DRAIN_GRACE_MS: '2000' } : {});
      servers.set(kind, t);
    }
    return t;
  }
  afterAll(async () => {
    for (const t of servers.values()) await t.close();
  });

  let plans = 0;
  for (const [name, fx] of load<ErrorFixture>(path.join(DIR, 'errors'))) {
    for (const format of fx.formats) {
      it(`${name} (${format}): ${fx.description.slice(0, 80)}`, async () => {
        const t = await serverFor(fx.setup);
        let key: string;
        let orgId: string;
        if (fx.setup === 'quota' || fx.setup === 'rate') {
          const plan = `golden-${fx.setup}-${++plans}`;
          await t.keys.createPlan(
            fx.setup === 'quota' ? { name: plan, monthlySpans: 0, rateLimitRps: 100 } : { name: plan, monthlySpans: 1_000_000, rateLimitRps: 1 },
          );
          ({ key, orgId } = await t.newKey(`${plan}-org`, plan));
        } else {
          ({ key, orgId } = await t.newKey());
        }
        const r = fx.request;
        let body: Buffer | undefined;
        if (r.bodyText !== undefined) body = Buffer.from(r.bodyText, 'utf8');
        else if (r.body !== undefined) {
          const doc = structuredClone(r.body) as { resourceSpans: { scopeSpans: { spans: { attributes: unknown[] }[] }[] }[] };
          if (r.padAttributeChars !== undefined)
            doc.resourceSpans[0]?.scopeSpans[0]?.spans[0]?.attributes.push({ key: 'pad', value: { stringValue: 'p'.repeat(r.padAttributeChars) } });
          body = encode(doc, format);
        }
        if (body !== undefined && r.contentEncoding === 'gzip' && r.compress !== false) body = gzipSync(body);
        const headers: Record<string, string> = { 'content-type': r.contentType ?? CONTENT_TYPE[format] };
        if (r.contentEncoding !== undefined) headers['content-encoding'] = r.contentEncoding;
        if ((r.auth ?? 'key') === 'key') headers['x-api-key'] = key;
        if (r.auth === 'unknown') headers.authorization = 'Bearer ti_' + 'x'.repeat(43);
        const send = () => fetch(`${t.url}/v1/traces`, { method: r.method ?? 'POST', headers, ...(body === undefined || r.method === 'GET' ? {} : { body }) });

        if (fx.setup === 'draining') void t.server.shutdown();
        if (fx.setup === 'keystore-closed') await t.serverKeys.close();
        let res = await send();
        if (fx.setup === 'rate') {
          for (let i = 0; i < 5 && res.status !== fx.expect.status; i++) res = await send();
        }
        expect(res.status).toBe(fx.expect.status);
        if (fx.expect.retryAfter === true) expect(res.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
        if (fx.expect.retryAfter === false) expect(res.headers.get('retry-after')).toBeNull();
        const answer = await decodeAnswer(res, r.contentType === undefined ? format : 'json');
        if (fx.expect.status === 200) {
          const partial = answer.partialSuccess as { rejectedSpans?: number | string; errorMessage?: string } | undefined;
          expect(Number(partial?.rejectedSpans ?? 0)).toBe(fx.expect.rejectedSpans ?? 0);
          if (fx.expect.message !== undefined) expect(partial?.errorMessage).toMatch(new RegExp(fx.expect.message, 's'));
          if (fx.setup === 'none') expect(await t.spans('SELECT span_id FROM spans WHERE org_id = ?', [orgId])).toHaveLength(fx.expect.rows ?? 0);
        } else {
          expect(answer.code).toBe(fx.expect.grpcCode);
          expect(String(answer.message)).toMatch(new RegExp(fx.expect.message ?? '', 'i'));
          if (format === 'json' || r.contentType !== undefined) expect(answer.error).toBe(answer.message);
          expect(String(answer.message)).not.toContain('x'.repeat(43));
        }
      });
    }
  }
});
