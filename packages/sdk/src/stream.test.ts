import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { anthropicStream } from './providers/anthropic.js';
import { geminiStream } from './providers/gemini.js';
import { openaiChatStream } from './providers/openai.js';
import { recordStream } from './stream.js';
import { Trace, type SpanSink } from './trace.js';
import type { SpanV1 } from './types.js';

/** A sink that keeps the ended spans: recording is tested apart from sending. */
function sink(opts: Partial<SpanSink> = {}) {
  const spans: SpanV1[] = [];
  const s: SpanSink = { recordInputs: true, recordOutputs: true, accept: (_t, span) => spans.push(span), ...opts };
  return { s, spans };
}

async function* paced<T>(items: T[], ms = 0): AsyncGenerator<T> {
  for (const i of items) {
    if (ms > 0) await new Promise((r) => setTimeout(r, ms));
    yield i;
  }
}

describe('recordStream', () => {
  it('passes the documented Anthropic stream through and ends the span with its usage and timing', async () => {
    const { s, spans } = sink();
    const span = new Trace(s, { name: 'chat' }).startSpan({ name: 'claude', model: 'claude-sonnet-4-5' });
    const events = (JSON.parse(fs.readFileSync(new URL('../test/fixtures/anthropic-stream.json', import.meta.url), 'utf8')) as { events: unknown[] }).events;
    const seen: unknown[] = [];
    for await (const e of recordStream(span, paced(events, 5), anthropicStream())) seen.push(e);
    expect(seen).toEqual(events);
    expect(spans).toHaveLength(1);
    const out = spans[0] as SpanV1;
    expect(out).toMatchObject({
      spanType: 'llm',
      provider: 'anthropic',
      modelId: 'claude-sonnet-4-5-20250929',
      status: 'ok',
      output: 'Hello!',
      usage: { inputTokens: 25, outputTokens: 15 },
    });
    expect(out.ttftMs).toBeGreaterThan(0);
    // Two text chunks, scaled to the 15 output tokens the provider reported.
    expect(out.chunkTokens).toEqual([8, 15]);
    expect(out.chunkOffsets).toHaveLength(2);
    expect(out.chunkOffsets?.[1]).toBeGreaterThanOrEqual(out.chunkOffsets?.[0] ?? 0);
    expect(out.reasoningOffsets).toBeUndefined();
  });

  it('thins a long stream to 200 samples and records reasoning blocks', async () => {
    const { s, spans } = sink();
    const span = new Trace(s, { name: 'chat' }).startSpan({ name: 'gemini' });
    const chunks = [
      ...Array.from({ length: 50 }, () => ({ candidates: [{ content: { parts: [{ text: 'hm', thought: true }] } }] })),
      ...Array.from({ length: 1000 }, (_, i) => ({
        candidates: [{ content: { parts: [{ text: 'x' }] } }],
        usageMetadata: { promptTokenCount: 10, candidatesTokenCount: (i + 1) * 3, thoughtsTokenCount: 500 },
      })),
    ];
    let n = 0;
    for await (const _ of recordStream(span, paced(chunks), geminiStream())) n++;
    expect(n).toBe(1050);
    const out = spans[0] as SpanV1;
    expect(out.chunkOffsets).toHaveLength(200);
    expect(out.chunkTokens).toHaveLength(200);
    expect(out.chunkTokens?.at(-1)).toBe(3000);
    expect(out.reasoningOffsets).toHaveLength(50);
    expect(out.reasoningChunkTokens?.at(-1)).toBe(500);
    expect(out.reasoningDurationMs).toBeGreaterThanOrEqual(0);
    expect(out.usage).toEqual({ inputTokens: 10, outputTokens: 3000, reasoningTokens: 500 });
    expect(out.output).toBe('x'.repeat(1000));
  });

  it('ends the span when the consumer stops early, and with the error when the stream fails', async () => {
    const { s, spans } = sink({ recordOutputs: false });
    const trace = new Trace(s, { name: 'chat' });
    const chunk = { choices: [{ index: 0, delta: { content: 'a' } }] };
    for await (const _ of recordStream(trace.startSpan({ name: 'early', provider: 'openai' }), paced([chunk, chunk, chunk]), openaiChatStream())) break;
    async function* failing() {
      yield chunk;
      throw new Error('connection reset');
    }
    const consume = async () => {
      for await (const _ of recordStream(trace.startSpan({ name: 'broken', provider: 'openai' }), failing(), openaiChatStream()));
    };
    await expect(consume()).rejects.toThrow('connection reset');
    expect(spans.map((x) => [x.name, x.status, x.errorMessage, x.chunkTokens, x.output])).toEqual([
      ['early', 'ok', undefined, [1], undefined],
      ['broken', 'error', 'Error: connection reset', [1], undefined],
    ]);
  });
});

describe('recording', () => {
  it('nests spans, generates ids, and keeps texts out when recording is off', async () => {
    const { s, spans } = sink({ recordInputs: false });
    const trace = new Trace(s, { agent: 'a', workflow: { name: 'w', runId: 'r1' }, customer: 'c1' });
    expect(trace.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(trace.header).toEqual({ traceId: trace.traceId, agentName: 'a', workflowName: 'w', workflowRunId: 'r1', customer: { id: 'c1' } });
    const root = trace.startSpan({ name: 'root', type: 'agent', input: 'secret' });
    const child = root.startSpan({ name: 'tool', type: 'tool' });
    child.end({ output: 'ok' });
    child.end({ output: 'twice' });
    await expect(trace.span({ name: 'fails' }, () => Promise.reject(new TypeError('bad')))).rejects.toThrow('bad');
    root.end({ status: 'ok' });
    expect(spans.map((x) => [x.name, x.parentSpanId === root.spanId, x.status, x.input, x.output, x.errorMessage])).toEqual([
      ['tool', true, 'ok', undefined, 'ok', undefined],
      ['fails', false, 'error', undefined, undefined, 'TypeError: bad'],
      ['root', false, 'ok', undefined, undefined, undefined],
    ]);
    for (const x of spans) {
      expect(x.spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(x.endTime).toBeGreaterThanOrEqual(x.startTime);
      expect(Number.isInteger(x.startTime)).toBe(true);
    }
  });
});
