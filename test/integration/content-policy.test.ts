import fs from 'node:fs';
import path from 'node:path';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { auditList, erase, setContentPolicy, setRetention } from '../../packages/cli/src/actions/lifecycle.js';
import { doctor } from '../../packages/cli/src/actions/doctor.js';
import type { CliContext } from '../../packages/cli/src/context.js';
import { makeSpan, makeTrace } from '../factories.js';
import { serverWithCli, type TestServer } from './support/ingest-server.js';

/**
 * An org's content policy on a running server: what it removes never
 * reaches the write log or the store, on POST /ingest and on OTLP alike;
 * erasure through the admin socket while the server runs, recorded in the
 * audit log by digest; the disk forecast in doctor and /metrics.
 */

const EMAIL = 'jane.doe@example.com';
const API_KEY = 'sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345';
const CARD = '4111 1111 1111 1111';
const SECRET_TEXT = `mail ${EMAIL}, key ${API_KEY}, card ${CARD}, order ORD-998877`;
const NOON = Date.now() - 3_600_000;

/** Every byte under the write log's folder, as text. */
function writeLogText(t: TestServer): string {
  const dir = t.config.walDir;
  let all = '';
  for (const f of fs.readdirSync(dir, { recursive: true }) as string[]) {
    const p = path.join(dir, f);
    if (fs.statSync(p).isFile()) all += fs.readFileSync(p).toString('latin1');
  }
  return all;
}

describe('content policy, erasure and disk forecast on a running server', () => {
  const both = serverWithCli();
  let t: TestServer;
  let ctx: CliContext;
  beforeAll(() => {
    t = both.server();
    ctx = both.cli();
  });

  it('redacts texts and metadata values before the write log, on /ingest and on OTLP', async () => {
    const { key } = await t.newKey('redacting');
    const set = await setContentPolicy(ctx, { org: 'redacting', redact: ['email', 'card', 'api-key'], rules: ['ORD-[0-9]+=>[order]'], actor: 'test' });
    expect(set.policy).toEqual({ record: 'full', rules: ['email', 'card', 'api-key'], custom: [{ pattern: 'ORD-[0-9]+', flags: '', replacement: '[order]' }] });
    const sent = makeTrace({
      traceId: 'redact-1',
      metadata: { contact: EMAIL, plain: 'kept as is' },
      spans: [makeSpan({ spanId: 'r1', startTime: NOON, endTime: NOON + 5, input: SECRET_TEXT, output: `reply to ${EMAIL}`, metadata: { card: CARD } })],
    });
    const res = await t.post({ version: 'v1', traces: [sent] }, { key });
    expect(res.status).toBe(202);

    const provider = new NodeTracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'svc' }),
      spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${t.url}/v1/traces`, headers: { authorization: `Bearer ${key}` } }))],
    });
    onTestFinished(() => provider.shutdown());
    const span = provider.getTracer('t').startSpan('chat gpt-4o', {
      startTime: NOON,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.input_tokens': 10,
        'gen_ai.usage.output_tokens': 2,
        'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: SECRET_TEXT }] }]),
      },
    });
    span.end(NOON + 10);
    await provider.forceFlush();

    // Acknowledged, not flushed yet: the write log holds the batches, redacted.
    const logged = writeLogText(t);
    expect(logged).toContain('[email]');
    for (const secret of [EMAIL, API_KEY, CARD, 'ORD-998877']) expect(logged).not.toContain(secret);

    const rows = await t.spans(
      'SELECT input, output, span_metadata_values, trace_metadata_values FROM spans ' +
        "WHERE org_id = (SELECT org_id FROM spans WHERE trace_id = 'redact-1') ORDER BY trace_id",
    );
    expect(rows).toHaveLength(2);
    expect(rows.find((r) => String(r.output).startsWith('reply'))).toMatchObject({
      input: 'mail [email], key [api-key], card [card], order [order]',
      output: 'reply to [email]',
      span_metadata_values: ['[card]'],
      trace_metadata_values: ['[email]', 'kept as is'],
    });
    const otlp = rows.find((r) => !String(r.output).startsWith('reply'));
    expect(String(otlp?.input)).toContain('mail [email], key [api-key], card [card], order [order]');
    for (const secret of [EMAIL, API_KEY, CARD]) expect(JSON.stringify(rows)).not.toContain(secret);
  });

  it('records no texts under no-text, and none of a span already past its text retention', async () => {
    const { key } = await t.newKey('quiet');
    await setContentPolicy(ctx, { org: 'quiet', record: 'no-text', actor: 'test' });
    expect(
      (
        await t.post(
          { version: 'v1', traces: [makeTrace({ traceId: 'q1', spans: [makeSpan({ startTime: NOON, endTime: NOON + 1, input: 'hi', output: 'there' })] })] },
          { key },
        )
      ).status,
    ).toBe(202);
    const { key: oldKey } = await t.newKey('short-texts');
    await setRetention(ctx, { org: 'short-texts', textDays: 2, actor: 'test' });
    const old = Date.now() - 5 * 86_400_000;
    expect(
      (
        await t.post(
          {
            version: 'v1',
            traces: [
              makeTrace({
                traceId: 'q2',
                spans: [
                  makeSpan({ spanId: 'old', startTime: old, endTime: old + 1, input: 'old prompt' }),
                  makeSpan({ spanId: 'new', startTime: NOON, endTime: NOON + 1, input: 'new prompt' }),
                ],
              }),
            ],
          },
          { key: oldKey },
        )
      ).status,
    ).toBe(202);
    expect(writeLogText(t)).not.toContain('old prompt');
    const rows = await t.spans("SELECT trace_id, span_id, input, output FROM spans WHERE trace_id IN ('q1', 'q2') ORDER BY trace_id, span_id");
    expect(rows.map((r) => [r.trace_id, r.input, r.output])).toEqual([
      ['q1', '', ''],
      ['q2', 'new prompt', ''],
      ['q2', '', ''],
    ]);
  });

  it('refuses a rule that is not a regular expression, saying which', async () => {
    await t.newKey('bad-rule');
    await expect(setContentPolicy(ctx, { org: 'bad-rule', rules: ['([a-z=>x'] })).rejects.toThrow(/rule 1 .* is not a valid regular expression/);
    await expect(setContentPolicy(ctx, { org: 'bad-rule', redact: ['ssn'] })).rejects.toThrow(/email.*card.*api-key/);
  });

  it('erases through the admin socket while the server runs, and records it by digest only', async () => {
    const { key, orgId } = await t.newKey('erasing');
    const traces = ['alice', 'alice', 'bob'].map((c, i) =>
      makeTrace({ traceId: `e${i}`, customer: { id: c }, spans: [makeSpan({ startTime: NOON + i, endTime: NOON + i + 1, modelId: 'gpt-4o' })] }),
    );
    expect((await t.post({ version: 'v1', traces }, { key })).status).toBe(202);
    await t.server.flush();
    const dry = await erase(ctx, { org: 'erasing', kind: 'customer', id: 'alice', dryRun: true, actor: 'ops@test' });
    expect(dry).toMatchObject({ spans: 2, traces: 2, dryRun: true });
    const done = await erase(ctx, { org: 'erasing', kind: 'customer', id: 'alice', dryRun: false, actor: 'ops@test' });
    expect(done).toMatchObject({ spans: 2, traces: 2, dryRun: false });
    expect(await t.spans('SELECT customer_id FROM spans WHERE org_id = ?', [orgId])).toEqual([{ customer_id: 'bob' }]);
    expect(await erase(ctx, { org: 'erasing', kind: 'customer', id: 'alice', dryRun: false, actor: 'ops@test' })).toMatchObject({ spans: 0, rollupRows: 0 });

    const log = await auditList(ctx, { org: 'erasing' });
    expect(log.map((e) => e.action)).toEqual(['erase', 'erase']);
    expect(log[1]).toMatchObject({ actor: 'ops@test', org: 'erasing', target: expect.stringMatching(/^customer sha256:[0-9a-f]{16}$/) });
    expect(JSON.stringify(log)).not.toContain('alice');
  });

  it('shows bytes per span, the ingest rate and days until full in doctor and /metrics', async () => {
    const checks = await doctor(ctx);
    const forecast = checks.find((c) => c.name === 'disk forecast');
    expect(forecast?.status).toBe('ok');
    expect(forecast?.detail).toMatch(/span store [\d.]+ GiB, \d+ spans \(\d+ bytes each\), \d+ spans in the last day; [\d.]+ GiB free/);
    await t.server.refreshDiskGauges();
    const metrics = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/trace_ingest_store_bytes\{store="spans"\} [1-9]\d*/);
    expect(metrics).toMatch(/trace_ingest_store_bytes_per_span [1-9]/);
    expect(metrics).toMatch(/trace_ingest_spans_received_per_second\{window="1h"\} [0-9.e-]+/);
    expect(metrics).toMatch(/trace_ingest_disk_days_until_full [0-9.e+]+/);
  });
});
