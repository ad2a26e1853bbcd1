import { describe, expect, it } from 'vitest';
import { validateIngest } from '@trace-ingest/shared/validate';
import { utf8Bytes } from './limits.js';
import { SpanQueue, headerJson, soloBodyBytes, takeBatch, type QueuedSpan } from './queue.js';

function item(traceId: string, i: number, text = ''): QueuedSpan {
  const json = JSON.stringify({ spanId: `s${i}`, spanType: 'tool', name: 'n', startTime: 1, endTime: 2, ...(text === '' ? {} : { input: text }) });
  return { ...headerJson({ traceId, traceName: 't' }), json, bytes: utf8Bytes(json) };
}

function drain(q: SpanQueue, maxBody: number) {
  const batches = [];
  for (let b = takeBatch(q, maxBody); b !== undefined; b = takeBatch(q, maxBody)) batches.push(b);
  return batches;
}

describe('takeBatch', () => {
  it('keeps at most 2000 spans per entry, continuing a trace in another entry with the same traceId', () => {
    const q = new SpanQueue(1e6, 1e9);
    for (let i = 0; i < 4500; i++) q.push(item('big', i));
    const [b] = drain(q, 10 * 1024 * 1024);
    const body = JSON.parse(b?.body ?? '') as { traces: { traceId: string; spans: unknown[] }[] };
    expect(body.traces.map((t) => [t.traceId, t.spans.length])).toEqual([
      ['big', 2000],
      ['big', 2000],
      ['big', 500],
    ]);
    expect(validateIngest(body).ok).toBe(true);
  });

  it('keeps at most 1000 traces per request', () => {
    const q = new SpanQueue(1e6, 1e9);
    for (let i = 0; i < 2500; i++) q.push(item(`t${i}`, i));
    const batches = drain(q, 10 * 1024 * 1024);
    expect(batches.map((b) => b.traces)).toEqual([1000, 1000, 500]);
    expect(batches.map((b) => b.spans)).toEqual([1000, 1000, 500]);
    for (const b of batches) expect(validateIngest(JSON.parse(b.body)).ok).toBe(true);
  });

  it('keeps each body under the byte limit, exactly counted, in order', () => {
    const q = new SpanQueue(1e6, 1e9);
    const limit = 64 * 1024;
    for (let i = 0; i < 300; i++) q.push(item(i % 3 === 0 ? 'a' : `b${i % 7}`, i, 'é€'.repeat(300)));
    const batches = drain(q, limit);
    expect(batches.length).toBeGreaterThan(5);
    const seen: string[] = [];
    for (const b of batches) {
      expect(new TextEncoder().encode(b.body).length).toBeLessThanOrEqual(limit);
      const body = JSON.parse(b.body) as { traces: { spans: { spanId: string }[] }[] };
      expect(validateIngest(body).ok).toBe(true);
      for (const t of body.traces) for (const s of t.spans) seen.push(s.spanId);
    }
    expect(seen).toHaveLength(300);
    expect(new Set(seen).size).toBe(300);
    expect(q.spans).toBe(0);
    expect(q.bytes).toBe(0);
  });

  it('computes the smallest body a span can travel in', () => {
    const it1 = item('x', 1, 'hello');
    const q = new SpanQueue(10, 1e9);
    q.push(it1);
    const b = takeBatch(q, 1e9);
    expect(soloBodyBytes(it1)).toBe(utf8Bytes(b?.body ?? ''));
  });
});

describe('SpanQueue', () => {
  it('bounds spans and bytes and gives items back in order', () => {
    const q = new SpanQueue(3, 1000);
    expect(q.fits(10)).toBe(true);
    for (let i = 0; i < 3; i++) q.push(item('t', i));
    expect(q.fits(1)).toBe(false);
    expect(q.shift()?.json).toContain('"s0"');
    expect(q.fits(1)).toBe(true);
    expect(new SpanQueue(10, 100).fits(101)).toBe(false);
    expect(q.clear()).toBe(2);
    expect([q.spans, q.bytes]).toEqual([0, 0]);
  });

  it('stays correct across compaction', () => {
    const q = new SpanQueue(1e6, 1e12);
    let next = 0;
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 3000; i++) q.push(item('t', round * 3000 + i));
      for (let i = 0; i < 2500; i++) expect(q.shift()?.json).toContain(`"s${next++}"`);
    }
    expect(q.spans).toBe(15000 - 12500);
  });
});
