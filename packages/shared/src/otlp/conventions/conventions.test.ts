import { describe, expect, it } from 'vitest';
import { mapExportRequest, type OtlpKeyValue } from '../../otlp-genai.js';
import { oneSpanRequest } from '../one-span.js';
import { CONVENTIONS } from './index.js';

function mapped(attributes: OtlpKeyValue[]) {
  const sp = mapExportRequest(oneSpanRequest(attributes)).traces[0]?.spans[0];
  if (sp === undefined) throw new Error('no span mapped');
  return sp;
}
const s = (key: string, v: string): OtlpKeyValue => ({ key, value: { stringValue: v } });
const n = (key: string, v: number): OtlpKeyValue => ({ key, value: { intValue: v } });

describe.each(CONVENTIONS.map((c) => [c.name, c] as const))('the %s family, as registered', (_name, c) => {
  it('reads each of its names into its column, and none of them into metadata', () => {
    const cases: [readonly string[] | undefined, string, 'modelId' | 'input' | 'output'][] = [
      [c.model, 'm-1', 'modelId'],
      [c.inputText, 'hello', 'input'],
      [c.outputText, 'bye', 'output'],
    ];
    for (const [names, value, column] of cases) {
      for (const k of names ?? []) {
        const sp = mapped([s(k, value)]);
        expect(sp[column], k).toBe(value);
        expect(sp.metadata, k).toBeUndefined();
      }
    }
    for (const k of c.provider ?? []) expect(mapped([s(k, 'openai')]).metadata, k).toBeUndefined();
  });

  it('reads each of its usage names into its bucket', () => {
    const field = {
      input: 'inputTokens',
      output: 'outputTokens',
      cacheRead: 'cachedInputTokens',
      cacheWrite: 'cacheWriteInputTokens',
      reasoning: 'reasoningTokens',
      total: 'totalTokens',
      cacheWrite1h: 'cacheWrite1hInputTokens',
      audioInput: 'audioInputTokens',
      audioOutput: 'audioOutputTokens',
    } as const;
    for (const [count, names] of Object.entries(c.usage ?? {})) {
      for (const k of names) expect(mapped([n(k, 7)]).usage?.[field[count as keyof typeof field]], k).toBe(7);
    }
  });
});

function mappedTrace(attributes: OtlpKeyValue[]) {
  const trace = mapExportRequest(oneSpanRequest(attributes)).traces[0];
  if (trace === undefined) throw new Error('no trace mapped');
  return trace;
}

describe.each(CONVENTIONS.map((c) => [c.name, c] as const))('the %s family: trace fields', (_name, c) => {
  it('reads its customer, session and trace-name attributes into the trace, not into metadata', () => {
    for (const k of c.customer ?? []) {
      const t = mappedTrace([s(k, 'cust-9')]);
      expect(t.customer?.id, k).toBe('cust-9');
      expect(t.spans[0]?.metadata, k).toBeUndefined();
    }
    for (const k of c.session ?? []) expect(mappedTrace([s(k, 'sess-9')]).sessionId, k).toBe('sess-9');
    // A trace name set by attribute wins over the root span's name.
    for (const k of c.traceName ?? []) expect(mappedTrace([s(k, 'named')]).traceName, k).toBe('named');
  });
});

describe('wrapper spans: the summed usage of their children is kept in metadata, unpriced', () => {
  const usage = [n('gen_ai.usage.input_tokens', 1000), n('gen_ai.usage.output_tokens', 100)];
  it.each<[string, OtlpKeyValue[]]>([
    ['a semconv invoke_agent span', [s('gen_ai.operation.name', 'invoke_agent'), ...usage]],
    ['an OpenInference CHAIN span', [s('openinference.span.kind', 'CHAIN'), n('llm.token_count.prompt', 1000), n('llm.token_count.completion', 100)]],
    ['an OpenInference AGENT span', [s('openinference.span.kind', 'AGENT'), n('llm.token_count.prompt', 1000)]],
    ['an OpenLLMetry workflow span (LangChain chain)', [s('traceloop.span.kind', 'workflow'), ...usage]],
    ['an OpenLLMetry agent span', [s('traceloop.span.kind', 'agent'), ...usage]],
    ['the Vercel AI SDK outer span', [s('ai.operationId', 'ai.generateText'), n('ai.usage.inputTokens', 1000)]],
  ])('%s', (_what, attributes) => {
    const sp = mapped(attributes);
    expect(sp.usage).toBeUndefined();
    expect(Object.keys(sp.metadata ?? {}).some((k) => /token/i.test(k))).toBe(true);
  });

  it('while the model calls themselves are priced as usual', () => {
    expect(mapped([s('gen_ai.operation.name', 'chat'), ...usage]).usage).toMatchObject({ inputTokens: 1000, outputTokens: 100 });
    expect(mapped([s('openinference.span.kind', 'LLM'), n('llm.token_count.prompt', 1000)]).usage).toMatchObject({ inputTokens: 1000 });
    expect(mapped([s('traceloop.span.kind', 'llm'), ...usage]).usage).toMatchObject({ inputTokens: 1000 });
  });
});

describe('token buckets as each library sends them', () => {
  it('the Vercel AI SDK 6: cache writes and reads from inputTokenDetails, taken out of the input they are part of', () => {
    const sp = mapped([
      s('ai.operationId', 'ai.generateText.doGenerate'),
      n('ai.usage.inputTokens', 5000),
      n('ai.usage.inputTokenDetails.noCacheTokens', 1000),
      n('ai.usage.inputTokenDetails.cacheReadTokens', 3000),
      n('ai.usage.inputTokenDetails.cacheWriteTokens', 1000),
      n('ai.usage.outputTokens', 800),
      n('ai.usage.outputTokenDetails.reasoningTokens', 300),
    ]);
    expect(sp.usage).toEqual({
      inputTokens: 1000,
      cachedInputTokens: 3000,
      cacheWriteInputTokens: 1000,
      outputTokens: 500,
      reasoningTokens: 300,
      totalTokens: 5800,
    });
  });
});

describe('the registry', () => {
  it('has one family per name', () => {
    expect(new Set(CONVENTIONS.map((c) => c.name)).size).toBe(CONVENTIONS.length);
  });
});

describe('billing beyond token counts, as the instrumentations send it', () => {
  it("semconv: OpenAI's response service tier (else the request's), not repeated in metadata", () => {
    expect(mapped([s('openai.response.service_tier', 'flex'), s('openai.request.service_tier', 'auto')])).toMatchObject({ serviceTier: 'flex' });
    expect(mapped([s('openai.request.service_tier', 'priority')]).serviceTier).toBe('priority');
    const older = mapped([s('gen_ai.openai.response.service_tier', 'default')]);
    expect(older.serviceTier).toBe('default');
    expect(older.metadata).toBeUndefined();
  });

  it('semconv: the region from the host the call went to (OpenAI data residency, a Vertex AI location)', () => {
    expect(mapped([s('server.address', 'eu.api.openai.com')]).region).toBe('eu');
    expect(mapped([s('server.address', 'us-east5-aiplatform.googleapis.com')]).region).toBe('us-east5');
    expect(mapped([s('server.address', 'aiplatform.googleapis.com')]).region).toBe('global');
    expect(mapped([s('server.address', 'api.anthropic.com')]).region).toBeUndefined();
  });

  it('OpenInference: audio tokens are parts of the prompt and completion counts', () => {
    const sp = mapped([
      s('openinference.span.kind', 'LLM'),
      n('llm.token_count.prompt', 1500),
      n('llm.token_count.prompt_details.audio', 1000),
      n('llm.token_count.completion', 900),
      n('llm.token_count.completion_details.audio', 800),
    ]);
    expect(sp.usage).toEqual({ inputTokens: 500, audioInputTokens: 1000, outputTokens: 100, audioOutputTokens: 800, totalTokens: 2400 });
  });

  it("the Vercel AI SDK: Anthropic's one-hour writes, tier and geography from the provider metadata", () => {
    const metadata = {
      anthropic: {
        usage: { service_tier: 'standard', inference_geo: 'us', cache_creation: { ephemeral_5m_input_tokens: 1000, ephemeral_1h_input_tokens: 2000 } },
      },
    };
    const sp = mapped([
      s('ai.operationId', 'ai.generateText.doGenerate'),
      n('ai.usage.inputTokens', 3050),
      n('ai.usage.inputTokenDetails.noCacheTokens', 50),
      n('ai.usage.inputTokenDetails.cacheWriteTokens', 3000),
      n('ai.usage.outputTokens', 10),
      s('ai.response.providerMetadata', JSON.stringify(metadata)),
    ]);
    expect(sp.usage).toEqual({ inputTokens: 50, cacheWriteInputTokens: 1000, cacheWrite1hInputTokens: 2000, outputTokens: 10, totalTokens: 3060 });
    expect(sp).toMatchObject({ serviceTier: 'standard', region: 'us' });
  });

  it("the Vercel AI SDK: OpenAI's service tier, Gemini's traffic type and audio by modality", () => {
    const openai = mapped([
      s('ai.operationId', 'ai.streamText.doStream'),
      s('ai.response.providerMetadata', '{"openai":{"responseId":"r","serviceTier":"flex"}}'),
    ]);
    expect(openai.serviceTier).toBe('flex');
    const google = {
      google: {
        usageMetadata: {
          trafficType: 'ON_DEMAND_PRIORITY',
          promptTokensDetails: [
            { modality: 'TEXT', tokenCount: 100 },
            { modality: 'AUDIO', tokenCount: 900 },
          ],
        },
      },
    };
    const sp = mapped([
      s('ai.operationId', 'ai.generateText.doGenerate'),
      n('ai.usage.inputTokens', 1000),
      n('ai.usage.outputTokens', 10),
      s('ai.response.providerMetadata', JSON.stringify(google)),
    ]);
    expect(sp).toMatchObject({ serviceTier: 'ON_DEMAND_PRIORITY', usage: { inputTokens: 100, audioInputTokens: 900, outputTokens: 10 } });
  });
});
