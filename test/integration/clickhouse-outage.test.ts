import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
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
    const t = await startTestServer(
      // Every tick flushes (no gathering of the steady load), so the flusher meets the outage within the wait below.
      { CLICKHOUSE_URL: url, FLUSH_INTERVAL_MS: '50', FLUSH_TIMEOUT_MS: '2000', FLUSH_GATHER_MS: '0' },
      { spanStore: new ClickHouseSpanStore({ url, requestTimeoutMs: 2000 }) },
    );
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    const metric = async (m: { get(): Promise<{ values: { value: number }[] }> }) => (await m.get()).values[0]?.value ?? 0;
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
    onTestFinished(async () => {
      stop = true;
      await load;
    });
    await new Promise((r) => setTimeout(r, 500));
    await ch.stop();
    const atStop = acked.size;
    await new Promise((r) => setTimeout(r, 1500));
    // Accepting while ClickHouse is down, and the flusher saw it down.
    expect(acked.size).toBeGreaterThan(atStop);
    expect(await metric(t.server.metrics.storeErrors)).toBeGreaterThan(0);
    expect(await metric(t.server.metrics.storeUp)).toBe(0);
    await ch.start();
    await new Promise((r) => setTimeout(r, 500));
    stop = true;
    await load;
    // Back: the flusher empties the write log on its own, without the flush the checks below force.
    const log = t.server.writeLog;
    for (let i = 0; (await metric(t.server.metrics.storeUp)) !== 1 || (log?.bytes ?? 0) > 0; i++) {
      if (i > 1200) throw new Error(`the write log did not drain after ClickHouse came back: ${log?.bytes ?? 0} bytes left`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // A re-sent batch: must still be one row per span.
    await t.post(
      { version: 'v1', traces: [makeTrace({ traceId: 'o-1', spans: Array.from({ length: 10 }, (_, i) => makeSpan({ spanId: `s${i}` })) })] },
      { key },
    );
    const rows = await t.spans("SELECT concat(trace_id, '/', span_id) AS id, count() AS copies FROM spans FINAL GROUP BY id");
    expect(rows.filter((r) => Number(r.copies) !== 1)).toEqual([]);
    const stored = new Set(rows.map((r) => String(r.id)));
    expect([...acked].filter((id) => !stored.has(id))).toEqual([]);
    expect(stored.size).toBe(acked.size);
  });
});
