import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { createOpenAI } from '@ai-sdk/openai';
import { OpenTelemetry } from '@ai-sdk/otel';
import { OpenAIInstrumentation } from '@arizeai/openinference-instrumentation-openai';
import { generateText, registerTelemetry } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { fakeOpenAi } from './support/fake-openai.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * The billing dimensions as real instrumentations export them over OTLP,
 * from an OpenAI-compatible server answering as OpenAI does (a response's
 * service_tier, audio token details): the Vercel AI SDK 7 through
 * @ai-sdk/otel with its providers' metadata, and OpenInference's OpenAI
 * instrumentation. Prices: platform.openai.com/docs/pricing as listed in
 * November 2026 (gpt-5 Flex $0.625 / $5; gpt-4o-audio-preview text $2.50 /
 * $10, audio $40 / $80).
 */
describe('billing dimensions from real instrumentations over OTLP', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => t?.close());

  function otel(key: string): NodeTracerProvider {
    const exporter = new OTLPTraceExporter({ url: `${t.url}/v1/traces`, headers: { authorization: `Bearer ${key}` } });
    const p = new NodeTracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'billing-api' }),
      spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 60_000 })],
    });
    onTestFinished(() => p.shutdown());
    return p;
  }

  it("the AI SDK 7: a flex response's tier from its provider metadata, priced at the flex rate", async () => {
    const { key, orgId } = await t.newKey('ai-sdk-flex');
    const p = otel(key);
    const baseURL = await fakeOpenAi({
      model: 'gpt-5-2025-08-07',
      serviceTier: 'flex',
      responsesUsage: {
        input_tokens: 100_000,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 100_000,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 200_000,
      },
    });
    registerTelemetry(new OpenTelemetry({ tracer: p.getTracer('ai'), providerMetadata: true }));
    const openai = createOpenAI({ baseURL, apiKey: 'test' });
    await generateText({ model: openai.responses('gpt-5'), prompt: 'Summarize the ticket.', providerOptions: { openai: { serviceTier: 'flex' } } });
    await p.forceFlush();
    await t.server.flush();
    const rows = await t.spans(
      "SELECT service_tier, priced, CAST(total_cost AS VARCHAR) AS cost FROM spans WHERE org_id = ? AND model_id <> '' AND span_type = 'llm'",
      [orgId],
    );
    // 100k × 0.625 + 100k × 5, per million
    expect(rows).toEqual([{ service_tier: 'flex', priced: true, cost: '0.562500000000000000' }]);
  });

  it("OpenInference's OpenAI instrumentation: audio tokens of a chat completion at the audio rates", async () => {
    const { key, orgId } = await t.newKey('openinference-audio');
    const p = otel(key);
    const baseURL = await fakeOpenAi({
      model: 'gpt-4o-audio-preview-2025-06-03',
      chatUsage: {
        prompt_tokens: 11_000,
        completion_tokens: 6000,
        total_tokens: 17_000,
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 10_000 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 5000 },
      },
    });
    const instrumentation = new OpenAIInstrumentation({ tracerProvider: p });
    instrumentation.manuallyInstrument(OpenAI);
    onTestFinished(() => instrumentation.disable());
    await new OpenAI({ baseURL, apiKey: 'test' }).chat.completions.create({ model: 'gpt-4o-audio-preview', messages: [{ role: 'user', content: 'Say hi.' }] });
    await p.forceFlush();
    await t.server.flush();
    const rows = await t.spans(
      'SELECT input_tokens::INTEGER AS input_tokens, audio_input_tokens::INTEGER AS audio_input_tokens, output_tokens::INTEGER AS output_tokens, ' +
        'audio_output_tokens::INTEGER AS audio_output_tokens, CAST(audio_input_cost AS VARCHAR) AS ai, ' +
        'CAST(audio_output_cost AS VARCHAR) AS ao, CAST(total_cost AS VARCHAR) AS cost FROM spans WHERE org_id = ?',
      [orgId],
    );
    // 1000 × 2.50 + 10,000 × 40 + 1000 × 10 + 5000 × 80, per million
    expect(rows).toEqual([
      {
        input_tokens: 1000,
        audio_input_tokens: 10_000,
        output_tokens: 1000,
        audio_output_tokens: 5000,
        ai: '0.400000000000000000',
        ao: '0.400000000000000000',
        cost: '0.812500000000000000',
      },
    ]);
  });
});
