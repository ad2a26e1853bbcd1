import type { Billing, Usage } from '../types.js';
import { compact, isObj, minus, n, type ChunkInfo, type StreamAdapter } from './common.js';

/** `usage` of a Chat Completions response (or of the last chunk with stream_options.include_usage). */
export interface OpenAIChatUsage {
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  total_tokens?: number | null;
  prompt_tokens_details?: { cached_tokens?: number | null; audio_tokens?: number | null } | null;
  completion_tokens_details?: { reasoning_tokens?: number | null; audio_tokens?: number | null } | null;
}

/** `usage` of a Responses API response, or of a Realtime API `response.done` (its `*_token_details`). */
export interface OpenAIResponsesUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  total_tokens?: number | null;
  input_tokens_details?: { cached_tokens?: number | null } | null;
  output_tokens_details?: { reasoning_tokens?: number | null } | null;
  /** Realtime: the input by modality, the cached part by modality too. */
  input_token_details?: {
    cached_tokens?: number | null;
    text_tokens?: number | null;
    audio_tokens?: number | null;
    image_tokens?: number | null;
    cached_tokens_details?: { text_tokens?: number | null; audio_tokens?: number | null; image_tokens?: number | null } | null;
  } | null;
  /** Realtime: the output by modality. */
  output_token_details?: { text_tokens?: number | null; audio_tokens?: number | null } | null;
}

/**
 * Chat Completions: `prompt_tokens` include the cached and the audio ones and
 * `completion_tokens` include reasoning and audio, so both are split into
 * disjoint buckets (audio models bill audio tokens at their own rates).
 */
export function openaiChatUsage(usage: OpenAIChatUsage | null | undefined): Usage {
  if (!isObj(usage)) return {};
  const u = usage as OpenAIChatUsage;
  return splitOpenAI(
    u.prompt_tokens,
    u.prompt_tokens_details?.cached_tokens,
    u.completion_tokens,
    u.completion_tokens_details?.reasoning_tokens,
    u.total_tokens,
    u.prompt_tokens_details?.audio_tokens,
    u.completion_tokens_details?.audio_tokens,
  );
}

/** Responses API: the same split under the Responses names; a Realtime `response.done` usage by modality. */
export function openaiResponsesUsage(usage: OpenAIResponsesUsage | null | undefined): Usage {
  if (!isObj(usage)) return {};
  const u = usage as OpenAIResponsesUsage;
  if (isObj(u.input_token_details) || isObj(u.output_token_details)) return realtimeUsage(u);
  return splitOpenAI(u.input_tokens, u.input_tokens_details?.cached_tokens, u.output_tokens, u.output_tokens_details?.reasoning_tokens, u.total_tokens);
}

/**
 * OpenAI's input includes the cached and audio tokens and its output the
 * reasoning and audio ones: all split into disjoint buckets (cached tokens
 * are text: Chat Completions does not say which part of them is audio).
 */
function splitOpenAI(
  input: unknown,
  cachedTokens: unknown,
  output: unknown,
  reasoningTokens: unknown,
  total: unknown,
  audioIn?: unknown,
  audioOut?: unknown,
): Usage {
  const cached = n(cachedTokens);
  const reasoning = n(reasoningTokens);
  const audioInput = n(audioIn);
  const audioOutput = n(audioOut);
  return compact({
    inputTokens: minus(minus(n(input), cached), audioInput),
    cachedInputTokens: cached,
    audioInputTokens: audioInput === 0 ? undefined : audioInput,
    outputTokens: minus(minus(n(output), reasoning), audioOutput),
    reasoningTokens: reasoning,
    audioOutputTokens: audioOutput === 0 ? undefined : audioOutput,
    totalTokens: n(total),
  });
}

/**
 * Realtime API usage: the input's text, audio and image tokens each include
 * their cached part, given apart in `cached_tokens_details`; images are
 * billed as text input here (there is no image-token bucket).
 */
function realtimeUsage(u: OpenAIResponsesUsage): Usage {
  const i = u.input_token_details ?? {};
  const c = i.cached_tokens_details ?? {};
  const o = u.output_token_details ?? {};
  const cachedAudio = n(c.audio_tokens) ?? 0;
  const cachedOther = (n(c.text_tokens) ?? 0) + (n(c.image_tokens) ?? 0);
  const textIn = (n(i.text_tokens) ?? 0) + (n(i.image_tokens) ?? 0);
  const audioIn = n(i.audio_tokens) ?? 0;
  return compact({
    inputTokens: Math.max(0, textIn - cachedOther),
    cachedInputTokens: cachedOther === 0 ? undefined : cachedOther,
    audioInputTokens: Math.max(0, audioIn - cachedAudio),
    cachedAudioInputTokens: cachedAudio === 0 ? undefined : cachedAudio,
    outputTokens: n(o.text_tokens) ?? 0,
    audioOutputTokens: n(o.audio_tokens) ?? 0,
    totalTokens: n(u.total_tokens),
  });
}

/** The service tier a response was served in (`default`, `flex`, `priority`, `scale`), from the response object or a stream chunk. */
export function openaiTier(response: unknown): Billing {
  return isObj(response) && typeof response['service_tier'] === 'string' ? { serviceTier: response['service_tier'] } : {};
}

/** Everything a response says about its cost, to spread into `span.end()`: usage by bucket and service tier. */
export function openaiBilling(response: unknown): Billing & { usage: Usage } {
  return { usage: openaiUsage(response), ...openaiTier(response) };
}

/**
 * Either API: a whole response or its `usage`, told apart by field names
 * (`prompt_tokens` for Chat Completions, `input_tokens` for Responses).
 */
export function openaiUsage(responseOrUsage: unknown): Usage {
  if (!isObj(responseOrUsage)) return {};
  const u = isObj(responseOrUsage['usage']) ? responseOrUsage['usage'] : responseOrUsage;
  if ('prompt_tokens' in u || 'completion_tokens' in u) return openaiChatUsage(u as OpenAIChatUsage);
  return openaiResponsesUsage(u as OpenAIResponsesUsage);
}

/**
 * Chat Completions chunks (`chat.completion.chunk`): `delta.content` is
 * output, `delta.reasoning_content` / `delta.reasoning` (OpenAI-compatible
 * reasoning servers) is reasoning; usage comes on the last chunk when the
 * request set `stream_options: { include_usage: true }`.
 */
export function openaiChatStream(): StreamAdapter<unknown> {
  let usage: Usage | undefined;
  let model: string | undefined;
  let tier: string | undefined;
  return {
    provider: 'openai',
    chunk(c): ChunkInfo | undefined {
      if (!isObj(c)) return undefined;
      if (typeof c['model'] === 'string') model = c['model'];
      if (typeof c['service_tier'] === 'string') tier = c['service_tier'];
      if (isObj(c['usage'])) usage = openaiChatUsage(c['usage'] as OpenAIChatUsage);
      const choices = c['choices'];
      const choice = Array.isArray(choices) ? (choices[0] as unknown) : undefined;
      const delta = isObj(choice) && isObj(choice['delta']) ? choice['delta'] : undefined;
      if (delta === undefined) return undefined;
      const info: ChunkInfo = {};
      const reasoning = delta['reasoning_content'] ?? delta['reasoning'];
      if (typeof reasoning === 'string' && reasoning !== '') info.reasoning = reasoning;
      if (typeof delta['content'] === 'string' && delta['content'] !== '') info.output = delta['content'];
      else if (typeof delta['refusal'] === 'string' && delta['refusal'] !== '') info.output = delta['refusal'];
      else if (Array.isArray(delta['tool_calls'])) info.output = '';
      return info.output === undefined && info.reasoning === undefined ? undefined : info;
    },
    usage: () => usage,
    billing: () => (tier === undefined ? {} : { serviceTier: tier }),
    model: () => model,
  };
}

/**
 * Responses API stream events: `response.output_text.delta` (and refusal /
 * function-call argument deltas) is output, `response.reasoning_text.delta`
 * and `response.reasoning_summary_text.delta` are reasoning; usage comes with
 * `response.completed` (or `.incomplete` / `.failed`).
 */
export function openaiResponsesStream(): StreamAdapter<unknown> {
  let usage: Usage | undefined;
  let model: string | undefined;
  let tier: string | undefined;
  return {
    provider: 'openai',
    chunk(e): ChunkInfo | undefined {
      if (!isObj(e) || typeof e['type'] !== 'string') return undefined;
      const type = e['type'];
      const delta = typeof e['delta'] === 'string' ? e['delta'] : '';
      switch (type) {
        case 'response.output_text.delta':
        case 'response.refusal.delta':
        case 'response.function_call_arguments.delta':
          return { output: type === 'response.function_call_arguments.delta' ? '' : delta };
        case 'response.reasoning_text.delta':
        case 'response.reasoning_summary_text.delta':
          return { reasoning: delta };
        case 'response.created':
        case 'response.completed':
        case 'response.incomplete':
        case 'response.failed': {
          const r = e['response'];
          if (isObj(r)) {
            if (typeof r['model'] === 'string') model = r['model'];
            if (typeof r['service_tier'] === 'string') tier = r['service_tier'];
            if (isObj(r['usage'])) usage = openaiResponsesUsage(r['usage'] as OpenAIResponsesUsage);
          }
          return undefined;
        }
        default:
          return undefined;
      }
    },
    usage: () => usage,
    billing: () => (tier === undefined ? {} : { serviceTier: tier }),
    model: () => model,
  };
}
