import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import type { PostgresControlStore } from '@trace-ingest/store/control-store-postgres';
import { usageReport, type GroupBy } from '@trace-ingest/store/reports';
import type { Span, Trace } from '@trace-ingest/shared/schema';
import { scanning } from '../rollup-traffic.js';
import type { ChildServer } from './support/child-server.js';
import { startReplicaCluster, type ReplicaCluster } from './support/replica-cluster.js';

const DAY = Date.UTC(2026, 9, 14, 12);
const GROUPINGS: GroupBy[] = ['customer', 'model', 'provider', 'day', 'span-type', 'workflow', 'trace', 'session'];

/** A trace of `n` spans (a root and its children) as a client sends it: the customer and session on the trace. */
function traceOf(traceId: string, n: number, opts: { customer?: string; spans?: number[] } = {}): Trace {
  const spans: Span[] = (opts.spans ?? Array.from({ length: n }, (_, i) => i)).map((i) => ({
    spanId: `s${i}`,
    ...(i === 0 ? {} : { parentSpanId: 's0' }),
    spanType: 'llm',
    name: `call-${i}`,
    provider: 'openai',
    modelId: i % 2 === 0 ? 'gpt-4o' : 'gpt-4o-mini',
    startTime: DAY + i * 1000,
    endTime: DAY + i * 1000 + 500,
    usage: { inputTokens: 1000 + i, outputTokens: 100 + i },
  }));
  return {
    traceId,
    traceName: 'race',
    workflowName: 'wf',
    workflowRunId: `run-${traceId}`,
    ...(opts.customer === undefined ? {} : { customer: { id: opts.customer, name: `Customer ${opts.customer}` }, sessionId: `sess-${opts.customer}` }),
    spans,
  };
}

/**
 * Three real replicas (`trace-ingest` servers, separate DATA_DIRs) on one
 * PostgreSQL, Redis and ClickHouse, raced as a load balancer and retrying
 * clients race them: after each race every usage grouping equals a scan of
 * the distinct spans, to the span and to the cent.
 */
describe('three replicas racing on one ClickHouse: every report equals the distinct spans', () => {
  const delays: number[] = [];

  let cluster: ReplicaCluster;
  let env: ReplicaCluster['env'];
  let replicas: ChildServer[] = [];
  let keys: PostgresControlStore;
  let spans: ClickHouseSpanStore;
  const post = async (r: ChildServer, key: string, traces: Trace[]) => {
    const res = await fetch(`${r.url}/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ version: 'v1', traces }),
    });
    await res.body?.cancel();
    return res.status;
  };
  const newOrg = async (name: string) => {
    await keys.createPlan({ name: `big-${name}`, monthlySpans: 100_000_000, rateLimitRps: 100_000 });
    await keys.createOrg({ name, planName: `big-${name}` });
    const { key } = await keys.createKey({ orgName: name });
    const org = await keys.getOrg(name);
    return { key, orgId: org!.id };
  };
  const distinctSpans = async (orgId: string) => Number((await spans.query('SELECT count() AS n FROM spans FINAL WHERE org_id = ?', [orgId]))[0]?.n);

  /** Waits until `n` distinct spans are stored and every replica's derivation has taken them up; the delay is recorded. */
  const settled = async (orgId: string, n: number) => {
    const deadline = Date.now() + 120_000;
    while ((await distinctSpans(orgId)) < n) {
      if (Date.now() > deadline) throw new Error(`only ${await distinctSpans(orgId)} of ${n} spans stored`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const stored = performance.now();
    const pending = (spans as { pendingDerivation?: (org: string) => Promise<unknown[]> }).pendingDerivation;
    if (pending === undefined) await new Promise((r) => setTimeout(r, 3000));
    else
      while ((await pending.call(spans, orgId)).length > 0) {
        if (Date.now() > deadline) throw new Error('the derivation did not take up the stored spans');
        await new Promise((r) => setTimeout(r, 50));
      }
    delays.push(performance.now() - stored);
  };
  const expectReportsEqualScan = async (orgId: string, n: number) => {
    const f = { orgId, from: DAY - 86_400_000 * 40, to: DAY + 86_400_000 };
    const mismatched: string[] = [];
    for (const by of GROUPINGS) {
      const [got, want] = [await usageReport(spans, { ...f, by }), await usageReport(scanning(spans), { ...f, by })];
      const total = (rows: typeof got) => rows.reduce((s, r) => s + r.spans, 0);
      if (JSON.stringify(got) !== JSON.stringify(want)) mismatched.push(`${by}: ${total(got)} spans against ${total(want)}`);
    }
    expect(mismatched, `${n} distinct spans`).toEqual([]);
    const byCustomer = await usageReport(spans, { ...f, by: 'customer' });
    expect(byCustomer.reduce((s, r) => s + r.spans, 0)).toBe(n);
  };

  beforeAll(async () => {
    cluster = await startReplicaCluster('ti_race', inject('clickhouseHttpUrl'));
    ({ env, replicas, keys, spans } = cluster);
  }, 60_000);

  afterAll(() => cluster?.dispose());

  it('counts a 20-span batch posted to two and to three replicas at the same moment once', async () => {
    const { key, orgId } = await newOrg('retries');
    for (let i = 0; i < 60; i++) {
      const batch = [traceOf(`retry-${i}`, 20, { customer: `c${i % 5}` })];
      const targets = i < 40 ? [i % 3, (i + 1) % 3] : [0, 1, 2];
      const statuses = await Promise.all(targets.map((t) => post(replicas[t] as ChildServer, key, batch)));
      expect(statuses.every((s) => s === 202)).toBe(true);
    }
    await settled(orgId, 1200);
    await expectReportsEqualScan(orgId, 1200);
  }, 240_000);

  it("puts children and their root posted to different replicas at the same moment under the root's customer", async () => {
    const { key, orgId } = await newOrg('roots');
    for (let i = 0; i < 40; i++) {
      const children = traceOf(`split-${i}`, 5, { spans: [1, 2, 3, 4] });
      const root = traceOf(`split-${i}`, 5, { customer: `c${i % 4}`, spans: [0] });
      const [a, b] = [i % 3, (i + 1) % 3];
      const statuses = await Promise.all([post(replicas[a] as ChildServer, key, [children]), post(replicas[b] as ChildServer, key, [root])]);
      expect(statuses).toEqual([202, 202]);
    }
    await settled(orgId, 200);
    const [none] = await spans.query("SELECT count() AS n FROM spans FINAL WHERE org_id = ? AND customer_id = ''", [orgId]);
    expect(Number(none?.n)).toBe(0);
    await expectReportsEqualScan(orgId, 200);
  }, 240_000);

  it('stays exact across a kill -9 of one replica amid retried batches', async () => {
    const { key, orgId } = await newOrg('killed');
    const acked = new Set<string>();
    let stop = false;
    let n = 0;
    const client = async (slot: number) => {
      while (!stop) {
        const traceId = `load-${++n}`;
        const batch = [traceOf(traceId, 20, { customer: `c${n % 7}` })];
        // Every other batch is also re-sent to another replica at the same moment.
        const targets = n % 2 === 0 ? [slot, (slot + 1) % 3] : [slot];
        const statuses = await Promise.all(targets.map((t) => post(replicas[t] as ChildServer, key, batch).catch(() => 0)));
        if (statuses.includes(202)) for (let i = 0; i < 20; i++) acked.add(`${traceId}/s${i}`);
      }
    };
    const load = Promise.all([0, 1, 2].map((s) => client(s)));
    await cluster.killDuringLoad(1, acked, 600, 400, async () => {
      stop = true;
      await load;
    });
    const stored = new Set(
      (await spans.query("SELECT concat(trace_id, '/', span_id) AS id FROM spans FINAL WHERE org_id = ? AND trace_id LIKE 'load-%'", [orgId])).map((r) =>
        String(r.id),
      ),
    );
    const deadline = Date.now() + 60_000;
    while ([...acked].some((x) => !stored.has(x)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      for (const r of await spans.query("SELECT concat(trace_id, '/', span_id) AS id FROM spans FINAL WHERE org_id = ?", [orgId])) stored.add(String(r.id));
    }
    expect([...acked].filter((x) => !stored.has(x))).toEqual([]);
    // A batch the killed replica logged but never answered is stored once its write log replays: wait until the spans stop changing.
    let count = stored.size;
    for (let last = -1; count !== last && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 3000));
      last = count;
      const [r] = await spans.query('SELECT count() AS n FROM (SELECT span_id FROM spans FINAL WHERE org_id = ?)', [orgId]);
      count = Number(r?.n ?? 0);
    }
    await settled(orgId, count);
    await expectReportsEqualScan(orgId, count);
  }, 300_000);

  it('deletes every derived row of expired days, though the spans went first (as a TTL merge drops them)', async () => {
    const { key, orgId } = await newOrg('expired');
    const old = traceOf('old-1', 10, { customer: 'gone' });
    for (const s of old.spans) {
      s.startTime -= 30 * 86_400_000;
      s.endTime -= 30 * 86_400_000;
    }
    expect(await post(replicas[0] as ChildServer, key, [old, traceOf('new-1', 10, { customer: 'kept' })])).toBe(202);
    await settled(orgId, 20);
    const cut = DAY - 86_400_000 * 10;
    // A TTL merge drops the expired spans on its own, before any retention pass.
    const ch = new URL(env.CLICKHOUSE_URL);
    const res = await fetch(`http://${ch.host}/?database=${ch.pathname.slice(1)}`, {
      method: 'POST',
      body: `ALTER TABLE spans DELETE WHERE org_id = '${orgId}' AND start_date < toDate('${new Date(cut).toISOString().slice(0, 10)}')`,
    });
    expect(res.status, await res.text()).toBe(200);
    const deadline = Date.now() + 60_000;
    while ((await distinctSpans(orgId)) > 10 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await spans.expire({ orgId, rowsBefore: cut }, 1_000_000);
    const [named] = await spans.query(
      "SELECT count() AS n FROM (SELECT minMerge(customer_c) AS c FROM traces WHERE org_id = ? GROUP BY trace_id) WHERE substring(c, 17) = 'gone'",
      [orgId],
    );
    expect(Number(named?.n)).toBe(0);
    for (const t of ['usage_daily', 'customers_daily', 'sessions_daily'])
      expect(Number((await spans.query(`SELECT count() AS n FROM ${t} WHERE org_id = ? AND customer_id = 'gone'`, [orgId]))[0]?.n), t).toBe(0);
    await settled(orgId, 10);
    await expectReportsEqualScan(orgId, 10);
  }, 180_000);
});
