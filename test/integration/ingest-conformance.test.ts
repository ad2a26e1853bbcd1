import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CASES } from '../conformance-cases.js';
import { makePayload, makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

describe('POST /ingest conformance (ingest-api-v1 section 2)', () => {
  let t: TestServer;
  let key: string;
  beforeAll(async () => {
    t = await startTestServer();
    await t.keys.createPlan({ name: 'unlimited', monthlySpans: 1e12, rateLimitRps: 1e6 });
    ({ key } = await t.newKey(undefined, 'unlimited'));
  });
  afterAll(async () => t.close());

  it.each(CASES)('$name', async (c) => {
    const p = makePayload();
    c.mutate(p);
    const res = await t.post(p, { key });
    const body = (await res.json()) as { accepted?: number; error?: string; issues?: { path: string; message: string }[] };
    if (c.issue === undefined) {
      expect(res.status, JSON.stringify(body).slice(0, 500)).toBe(202);
      expect(body.accepted).toBe(p.traces.reduce((n, tr) => n + tr.spans.length, 0));
    } else {
      expect(res.status).toBe(400);
      expect(typeof body.error).toBe('string');
      expect(body.issues?.map((i) => i.path)).toContain(c.issue);
      for (const i of body.issues ?? []) expect(typeof i.message).toBe('string');
    }
  });

  it('caps the number of reported issues', async () => {
    const p = makePayload({ traces: [makeTrace({ spans: Array.from({ length: 500 }, () => makeSpan({ startTime: 10, endTime: 1 })) })] });
    const res = await t.post(p, { key });
    const body = (await res.json()) as { issues: unknown[] };
    expect(res.status).toBe(400);
    expect(body.issues.length).toBeGreaterThan(0);
    expect(body.issues.length).toBeLessThanOrEqual(50);
  });

  it.each([
    ['not JSON', '{"version":'],
    ['empty body', ''],
    ['a JSON string', '"v1"'],
    ['a JSON array', '[]'],
    ['null', 'null'],
  ])('answers 400 with an error for %s', async (_name, raw) => {
    const res = await t.post(undefined, { key, raw });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string };
    expect(body.error.length).toBeGreaterThan(10);
  });
});
