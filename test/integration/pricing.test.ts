import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { createContext } from '@trace-ingest/cli/program-context';
import { setPrice, showPrice, unpricedModels } from '@trace-ingest/cli/actions/prices';
import { makePayload, makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

const NOON = Date.UTC(2026, 0, 15, 12, 0, 0);

describe('pricing through the running server', () => {
  let t: TestServer;
  let key: string;
  beforeAll(async () => {
    t = await startTestServer();
    ({ key } = await t.newKey('priced-org'));
    await t.newKey('other-org');
  });
  afterAll(async () => t.close());

  const post = (traceId: string, span: Parameters<typeof makeSpan>[0]) =>
    t.post(makePayload({ traces: [makeTrace({ traceId, spans: [makeSpan({ startTime: NOON, endTime: NOON + 10, ...span })] })] }), { key });

  it('stores exact per-dimension costs from the catalog', async () => {
    expect(
      (await post('cat', { spanId: 'a', provider: 'openai', modelId: 'gpt-4o', usage: { inputTokens: 1234, cachedInputTokens: 1000, outputTokens: 567 } }))
        .status,
    ).toBe(202);
    const [row] = await t.spans(
      'SELECT input_cost::VARCHAR AS i, cached_input_cost::VARCHAR AS c, output_cost::VARCHAR AS o, total_cost::VARCHAR AS total, ' +
        "priced, price_source FROM spans WHERE trace_id = 'cat'",
    );
    // 1234 × 2.50 + 1000 × 1.25 + 567 × 10, per million
    expect(row).toMatchObject({ i: '0.003085000000000000', c: '0.001250000000000000', o: '0.005670000000000000', total: '0.010005000000000000', priced: true });
    expect(String(row?.price_source)).toMatch(/^catalog:genai-prices@/);
  });

  it('applies an override set with the CLI on the next request, for that org only', async () => {
    const ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    try {
      await setPrice(ctx, { model: 'my-model', org: 'priced-org', input: '1.5', output: '3', request: '0.002' });
      const shown = await showPrice(ctx, { model: 'my-model', org: 'priced-org' });
      expect(shown).toMatchObject({
        inputPerMtok: '1.5',
        outputPerMtok: '3',
        requestEach: '0.002',
        cachedInputPerMtok: '1.5',
        fallbacks: { cachedInput: 'input' },
      });
      await expect(showPrice(ctx, { model: 'my-model', org: 'other-org' })).rejects.toThrow(/no price for model "my-model"/);
    } finally {
      await ctx.close();
    }
    expect((await post('ovr', { spanId: 'b', modelId: 'my-model', usage: { inputTokens: 2_000_000, requestCount: 3 } })).status).toBe(202);
    const [row] = await t.spans(
      "SELECT input_cost::VARCHAR AS i, request_cost::VARCHAR AS r, total_cost::VARCHAR AS total, price_source FROM spans WHERE trace_id = 'ovr'",
    );
    expect(row).toMatchObject({ i: '3.000000000000000000', r: '0.006000000000000000', total: '3.006000000000000000' });
    expect(String(row?.price_source)).toMatch(/^override:price_/);
  });

  it('stores spans of unknown models unpriced and lists them', async () => {
    await post('unk', { spanId: 'c', provider: 'acme', modelId: 'acme-mystery-1', usage: { inputTokens: 10 } });
    await post('unk', { spanId: 'd', provider: 'acme', modelId: 'acme-mystery-1', usage: { inputTokens: 10 } });
    const rows = await t.spans("SELECT priced, total_cost = 0 AS zero FROM spans WHERE trace_id = 'unk'");
    expect(rows).toEqual([
      { priced: false, zero: true },
      { priced: false, zero: true },
    ]);
  });
});

describe('prices unpriced', () => {
  it('lists models without a price from the span store, with counts', async () => {
    const t = await startTestServer();
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    const spans = [
      makeSpan({ modelId: 'ghost-1', provider: 'x' }),
      makeSpan({ modelId: 'ghost-1', provider: 'x' }),
      makeSpan({ modelId: 'gpt-4o' }),
      makeSpan({ modelId: 'ghost-2' }),
    ];
    expect((await t.post(makePayload({ traces: [makeTrace({ spans })] }), { key })).status).toBe(202);
    await t.server.shutdown();
    const ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
    onTestFinished(() => ctx.close());
    const list = await unpricedModels(ctx);
    expect(list.map((m) => [m.provider, m.model, m.spans])).toEqual([
      ['x', 'ghost-1', 2],
      ['', 'ghost-2', 1],
    ]);
  });
});
