import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { makeSpan, makeTrace } from '../factories.js';
import { startClickHouse, type ClickHouseTestServer } from './support/clickhouse-server.js';
import { startTestServer } from './support/ingest-server.js';

describe('ClickHouse down mid-load', () => {
  let ch: ClickHouseTestServer;
  beforeAll(async () => {
    ch = await startClickHouse();
  });
  afterAll(async () => ch.dispose());

  it('keeps accepting, loses nothing and duplicates nothing once ClickHouse is back', async () => {
    const url = ch.urlFor('outage_e2e');
    const t = await startTestServer({ CLICKHOUSE_URL: url, FLUSH_INTERVAL_MS: '50', FLUSH_TIMEOUT_MS: '2000' }, { spanStore: new ClickHouseSpanStore({ url, requestTimeoutMs: 2000 }) });
    const { key } = await t.newKey();
    const acked = new Set<string>();
    let stop = false;
    let n = 0;
    const client = async () => {
      while (!stop) {
        const id = ++n;
        const spans = Array.from({ length: 10 }, (_, i) => makeSpan({ spanId: `s${i}` }));
        const res = await t.post({ version: 'v1', traces: [makeTrace({ traceId: `o-${id}`, spans })] }, { key });
        if (res.status === 202) for (const s of spans) acked.add(`o-${id}/${s.spanId}`);
        await res.body?.cancel();
      }
    };
    const load = Promise.all(Array.from({ length: 4 }, () => client()));
    await new Promise((r) => setTimeout(r, 500));
    await ch.stop();
    await new Promise((r) => setTimeout(r, 1500));
    const duringOutage = acked.size;
    await ch.start();
    await new Promise((r) => setTimeout(r, 500));
    stop = true;
    await load;
    expect(acked.size).toBeGreaterThan(duringOutage);
    // A re-sent batch: must still be one row per span.
    await t.post({ version: 'v1', traces: [makeTrace({ traceId: 'o-1', spans: Array.from({ length: 10 }, (_, i) => makeSpan({ spanId: `s${i}` })) })] }, { key });
    const rows = await t.spans("SELECT concat(trace_id, '/', span_id) AS id, count() AS copies FROM spans FINAL GROUP BY id");
    expect(rows.filter((r) => Number(r.copies) !== 1)).toEqual([]);
    const stored = new Set(rows.map((r) => String(r.id)));
    expect([...acked].filter((id) => !stored.has(id))).toEqual([]);
    expect(stored.size).toBe(acked.size);
    await t.close();
  });
});
