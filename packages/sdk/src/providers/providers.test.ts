import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { anthropicBilling, anthropicStream, anthropicUsage } from './anthropic.js';
import { geminiBilling, geminiStream, geminiTier, geminiUsage } from './gemini.js';
import { openaiBilling, openaiChatStream, openaiChatUsage, openaiResponsesStream, openaiResponsesUsage, openaiTier, openaiUsage } from './openai.js';

/** Response objects as published by each provider; each file names its source. */
function fixture(name: string): Record<string, unknown> {
  const f = JSON.parse(fs.readFileSync(new URL(`../../test/fixtures/${name}.json`, import.meta.url), 'utf8')) as { source: string };
  expect(f.source).toMatch(/\S/);
  return f as unknown as Record<string, unknown>;
}
const response = (name: string) => fixture(name)['response'] as Record<string, unknown>;

describe('OpenAI usage into disjoint buckets', () => {
  it('chat completion object (API reference)', () => {
    const r = response('openai-chat-completion');
    const expected = { inputTokens: 1117, cachedInputTokens: 0, outputTokens: 46, reasoningTokens: 0, totalTokens: 1163 };
    expect(openaiChatUsage(r['usage'] as never)).toEqual(expected);
    expect(openaiUsage(r)).toEqual(expected);
  });

  it('chat completion with a prompt-cache hit: cached tokens leave inputTokens', () => {
    const r = response('openai-chat-prompt-caching');
    expect(openaiUsage(r)).toEqual({ inputTokens: 86, cachedInputTokens: 1920, outputTokens: 300, reasoningTokens: 0, totalTokens: 2306 });
  });

  it('Responses API with reasoning: reasoning tokens leave outputTokens', () => {
    const r = response('openai-responses-reasoning');
    const expected = { inputTokens: 75, cachedInputTokens: 0, outputTokens: 162, reasoningTokens: 1024, totalTokens: 1261 };
    expect(openaiResponsesUsage(r['usage'] as never)).toEqual(expected);
    expect(openaiUsage(r)).toEqual(expected);
  });

  it('the README example (o4-mini, 1,500 of 2,000 cached, 500 of 800 reasoning)', () => {
    expect(
      openaiChatUsage({
        prompt_tokens: 2000,
        completion_tokens: 800,
        prompt_tokens_details: { cached_tokens: 1500 },
        completion_tokens_details: { reasoning_tokens: 500 },
      }),
    ).toEqual({
      inputTokens: 500,
      cachedInputTokens: 1500,
      outputTokens: 300,
      reasoningTokens: 500,
    });
  });

  it('tolerates missing and null details, and never goes negative', () => {
    expect(openaiChatUsage({ prompt_tokens: 10, completion_tokens: 5, prompt_tokens_details: null, completion_tokens_details: null })).toEqual({
      inputTokens: 10,
      outputTokens: 5,
    });
    expect(openaiChatUsage({ prompt_tokens: 10, prompt_tokens_details: { cached_tokens: 12 } })).toEqual({ inputTokens: 0, cachedInputTokens: 12 });
    expect(openaiUsage(null)).toEqual({});
    expect(openaiUsage({ usage: null })).toEqual({});
  });
});

describe('Anthropic usage', () => {
  it('Messages response (API reference): cache reads and writes are their own buckets', () => {
    expect(anthropicUsage(response('anthropic-message') as never)).toEqual({
      inputTokens: 2095,
      cachedInputTokens: 2051,
      cacheWriteInputTokens: 2051,
      outputTokens: 503,
    });
  });

  it('the README example (claude-sonnet-4: 1,000 / 10,000 read / 2,000 written / 500)', () => {
    expect(anthropicUsage({ input_tokens: 1000, cache_read_input_tokens: 10000, cache_creation_input_tokens: 2000, output_tokens: 500 })).toEqual({
      inputTokens: 1000,
      cachedInputTokens: 10000,
      cacheWriteInputTokens: 2000,
      outputTokens: 500,
    });
  });

  it('counts server-side web searches', () => {
    expect(anthropicUsage({ input_tokens: 1, output_tokens: 2, server_tool_use: { web_search_requests: 3 } })).toEqual({
      inputTokens: 1,
      outputTokens: 2,
      webSearchCount: 3,
    });
  });
});

describe('Gemini usage', () => {
  it('cached content (caching guide): the cached part leaves inputTokens', () => {
    expect(geminiUsage(response('gemini-cached-content') as never)).toEqual({
      inputTokens: 29,
      cachedInputTokens: 696190,
      outputTokens: 214,
      totalTokens: 696433,
    });
  });

  it('a thinking model: thoughts are reasoning, candidates stay output', () => {
    expect(geminiUsage(response('gemini-thinking') as never)).toEqual({ inputTokens: 8, outputTokens: 18, reasoningTokens: 240, totalTokens: 266 });
  });

  it('tool-use prompt tokens are input', () => {
    expect(geminiUsage({ promptTokenCount: 100, toolUsePromptTokenCount: 20, cachedContentTokenCount: 50, candidatesTokenCount: 7 })).toEqual({
      inputTokens: 70,
      cachedInputTokens: 50,
      outputTokens: 7,
    });
  });
});

describe('stream adapters', () => {
  it('Anthropic: the documented event stream', () => {
    const a = anthropicStream();
    const infos = (fixture('anthropic-stream')['events'] as unknown[]).map((e) => a.chunk(e)).filter((i) => i !== undefined);
    expect(infos).toEqual([{ output: 'Hello' }, { output: '!' }]);
    expect(a.usage()).toEqual({ inputTokens: 25, outputTokens: 15 });
    expect(a.model()).toBe('claude-sonnet-4-5-20250929');
  });

  it('Anthropic: thinking deltas are reasoning', () => {
    const a = anthropicStream();
    expect(a.chunk({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Let me' } })).toEqual({ reasoning: 'Let me' });
  });

  it('OpenAI chat chunks, with usage on the last one', () => {
    const a = openaiChatStream();
    const chunks = [
      {
        id: 'c',
        object: 'chat.completion.chunk',
        model: 'gpt-4o-mini',
        choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
      },
      { id: 'c', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content: 'Hello' }, finish_reason: null }] },
      { id: 'c', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
      { id: 'c', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 } },
    ];
    expect(chunks.map((c) => a.chunk(c)).filter((i) => i !== undefined)).toEqual([{ output: 'Hello' }]);
    expect(a.usage()).toEqual({ inputTokens: 9, outputTokens: 1, totalTokens: 10 });
    expect(a.model()).toBe('gpt-4o-mini');
  });

  it('OpenAI Responses events', () => {
    const a = openaiResponsesStream();
    const events = [
      { type: 'response.created', response: { model: 'o4-mini', usage: null } },
      { type: 'response.reasoning_summary_text.delta', delta: 'Thinking' },
      { type: 'response.output_text.delta', delta: 'Hi' },
      { type: 'response.completed', response: { model: 'o4-mini-2025-04-16', usage: response('openai-responses-reasoning')['usage'] } },
    ];
    expect(events.map((e) => a.chunk(e)).filter((i) => i !== undefined)).toEqual([{ reasoning: 'Thinking' }, { output: 'Hi' }]);
    expect(a.usage()).toMatchObject({ outputTokens: 162, reasoningTokens: 1024 });
    expect(a.model()).toBe('o4-mini-2025-04-16');
  });

  it('Gemini chunks: thought parts are reasoning, cumulative candidate counts are passed on', () => {
    const a = geminiStream();
    expect(
      a.chunk({ candidates: [{ content: { parts: [{ text: 'plan', thought: true }] } }], usageMetadata: { promptTokenCount: 8, thoughtsTokenCount: 5 } }),
    ).toEqual({ reasoning: 'plan' });
    expect(
      a.chunk({
        candidates: [{ content: { parts: [{ text: 'AI learns' }] } }],
        usageMetadata: { promptTokenCount: 8, candidatesTokenCount: 3 },
        modelVersion: 'gemini-2.5-flash',
      }),
    ).toEqual({ output: 'AI learns', outputTokensSoFar: 3 });
    expect(a.usage()).toEqual({ inputTokens: 8, outputTokens: 3 });
    expect(a.model()).toBe('gemini-2.5-flash');
  });
});

/**
 * The billing dimensions as the providers' API references show them in their response objects:
 * platform.openai.com/docs/api-reference/chat/object (usage.*_tokens_details.audio_tokens, service_tier),
 * platform.openai.com/docs/api-reference/realtime-server-events/response/done (usage by modality),
 * platform.claude.com/docs/en/api/messages (usage.cache_creation, service_tier, inference_geo),
 * ai.google.dev/api/generate-content#UsageMetadata (modality details) and Vertex AI's trafficType.
 */
describe('billing beyond token counts', () => {
  it('OpenAI chat: audio tokens leave the input and output counts; service_tier comes along', () => {
    const response = {
      object: 'chat.completion',
      model: 'gpt-4o-audio-preview-2025-06-03',
      service_tier: 'default',
      usage: {
        prompt_tokens: 1200,
        completion_tokens: 900,
        total_tokens: 2100,
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 1000 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 800 },
      },
    };
    expect(openaiBilling(response)).toEqual({
      usage: {
        inputTokens: 200,
        cachedInputTokens: 0,
        audioInputTokens: 1000,
        outputTokens: 100,
        reasoningTokens: 0,
        audioOutputTokens: 800,
        totalTokens: 2100,
      },
      serviceTier: 'default',
    });
    expect(openaiTier({ service_tier: 'flex' })).toEqual({ serviceTier: 'flex' });
    expect(openaiTier({})).toEqual({});
  });

  it('OpenAI Realtime response.done: each modality apart, cached audio apart', () => {
    const usage = {
      total_tokens: 1563,
      input_tokens: 1306,
      output_tokens: 257,
      input_token_details: { text_tokens: 1136, audio_tokens: 170, cached_tokens: 1088, cached_tokens_details: { text_tokens: 1024, audio_tokens: 64 } },
      output_token_details: { text_tokens: 57, audio_tokens: 200 },
    };
    expect(openaiResponsesUsage(usage)).toEqual({
      inputTokens: 112,
      cachedInputTokens: 1024,
      audioInputTokens: 106,
      cachedAudioInputTokens: 64,
      outputTokens: 57,
      audioOutputTokens: 200,
      totalTokens: 1563,
    });
  });

  it('Anthropic: one-hour cache writes apart from the five-minute ones; tier and inference geography', () => {
    const response = {
      model: 'claude-opus-4-6',
      usage: {
        input_tokens: 50,
        cache_read_input_tokens: 100_000,
        cache_creation_input_tokens: 3000,
        cache_creation: { ephemeral_5m_input_tokens: 1000, ephemeral_1h_input_tokens: 2000 },
        output_tokens: 400,
        service_tier: 'batch',
        inference_geo: 'us',
      },
    };
    expect(anthropicBilling(response)).toEqual({
      usage: { inputTokens: 50, cachedInputTokens: 100_000, cacheWriteInputTokens: 1000, cacheWrite1hInputTokens: 2000, outputTokens: 400 },
      serviceTier: 'batch',
      region: 'us',
    });
  });

  it('Anthropic stream: the tier and geography of message_start reach the span', () => {
    const a = anthropicStream();
    a.chunk({ type: 'message_start', message: { model: 'claude-opus-4-6', usage: { input_tokens: 5, service_tier: 'priority', inference_geo: 'global' } } });
    a.chunk({ type: 'message_delta', usage: { output_tokens: 7 } });
    expect(a.usage()).toEqual({ inputTokens: 5, outputTokens: 7 });
    expect(a.billing?.()).toEqual({ serviceTier: 'priority', region: 'global' });
  });

  it('Gemini: audio in, cached and out from the modality details; Vertex AI traffic type as tier', () => {
    const response = {
      usageMetadata: {
        promptTokenCount: 1500,
        cachedContentTokenCount: 600,
        candidatesTokenCount: 700,
        totalTokenCount: 2200,
        promptTokensDetails: [
          { modality: 'TEXT', tokenCount: 500 },
          { modality: 'AUDIO', tokenCount: 1000 },
        ],
        cacheTokensDetails: [
          { modality: 'TEXT', tokenCount: 200 },
          { modality: 'AUDIO', tokenCount: 400 },
        ],
        candidatesTokensDetails: [
          { modality: 'TEXT', tokenCount: 100 },
          { modality: 'AUDIO', tokenCount: 600 },
        ],
        trafficType: 'ON_DEMAND_FLEX',
      },
    };
    expect(geminiBilling(response)).toEqual({
      usage: {
        inputTokens: 300,
        cachedInputTokens: 200,
        audioInputTokens: 600,
        cachedAudioInputTokens: 400,
        outputTokens: 100,
        audioOutputTokens: 600,
        totalTokens: 2200,
      },
      serviceTier: 'flex',
    });
    expect(geminiTier({ trafficType: 'PROVISIONED_THROUGHPUT' })).toEqual({ serviceTier: 'provisioned' });
  });
});
