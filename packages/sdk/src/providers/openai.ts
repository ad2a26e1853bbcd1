import type { Usage } from '../types.js';
import { compact, isObj, minus, n, type ChunkInfo, type StreamAdapter } from './common.js';

/** `usage` of a Chat Completions response (or of the last chunk with stream_options.include_usage). */
export interface OpenAIChatUsage {
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  total_tokens?: number | null;
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
  completion_tokens_details?: { reasoning_tokens?: number | null } | null;
}

/** `usage` of a Responses API response. */
export interface OpenAIResponsesUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  total_tokens?: number | null;
  input_tokens_details?: { cached_tokens?: number | null } | null;
  output_tokens_details?: { reasoning_tokens?: number | null } | null;
}

/**
 * Chat Completions: `prompt_tokens` include the cached ones and
 * `completion_tokens` include reasoning, so both are split into disjoint buckets.
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
  );
}

/** Responses API: the same split under the Responses names. */
export function openaiResponsesUsage(usage: OpenAIResponsesUsage | null | undefined): Usage {
  if (!isObj(usage)) return {};
  const u = usage as OpenAIResponsesUsage;
  return splitOpenAI(u.input_tokens, u.input_tokens_details?.cached_tokens, u.output_tokens, u.output_tokens_details?.reasoning_tokens, u.total_tokens);
}

/** OpenAI's input includes the cached tokens and its output the reasoning ones: both split into disjoint buckets. */
function splitOpenAI(input: unknown, cachedTokens: unknown, output: unknown, reasoningTokens: unknown, total: unknown): Usage {
  const cached = n(cachedTokens);
  const reasoning = n(reasoningTokens);
  return compact({
    inputTokens: minus(n(input), cached),
    cachedInputTokens: cached,
    outputTokens: minus(n(output), reasoning),
    reasoningTokens: reasoning,
    totalTokens: n(total),
  });
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
  return {
    provider: 'openai',
    chunk(c): ChunkInfo | undefined {
      if (!isObj(c)) return undefined;
      if (typeof c['model'] === 'string') model = c['model'];
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
            if (isObj(r['usage'])) usage = openaiResponsesUsage(r['usage'] as OpenAIResponsesUsage);
          }
          return undefined;
        }
        default:
          return undefined;
      }
    },
    usage: () => usage,
    model: () => model,
  };
}
