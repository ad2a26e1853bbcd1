import type { Usage } from '../types.js';
import { compact, isObj, n, type ChunkInfo, type StreamAdapter } from './common.js';

/** `usage` of an Anthropic Messages response. */
export interface AnthropicUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  server_tool_use?: { web_search_requests?: number | null } | null;
}

/**
 * `input_tokens` already exclude cache reads and writes, so each count maps
 * to its bucket as is; server-side web searches are priced per search.
 */
export function anthropicUsage(responseOrUsage: AnthropicUsage | { usage?: AnthropicUsage | null } | null | undefined): Usage {
  if (!isObj(responseOrUsage)) return {};
  const u = (isObj(responseOrUsage['usage']) ? responseOrUsage['usage'] : responseOrUsage) as AnthropicUsage;
  const searches = n(u.server_tool_use?.web_search_requests);
  return compact({
    inputTokens: n(u.input_tokens),
    cachedInputTokens: n(u.cache_read_input_tokens),
    cacheWriteInputTokens: n(u.cache_creation_input_tokens),
    outputTokens: n(u.output_tokens),
    webSearchCount: searches === 0 ? undefined : searches,
  });
}

/**
 * Messages stream events: `message_start` carries the input usage,
 * `content_block_delta` text (output) or thinking (reasoning) deltas, and
 * `message_delta` the cumulative output usage.
 */
export function anthropicStream(): StreamAdapter<unknown> {
  let raw: AnthropicUsage | undefined;
  let model: string | undefined;
  const merge = (u: unknown): void => {
    if (!isObj(u)) return;
    raw = { ...raw };
    for (const [k, v] of Object.entries(u)) if (v !== null && v !== undefined) (raw as Record<string, unknown>)[k] = v;
  };
  return {
    provider: 'anthropic',
    chunk(e): ChunkInfo | undefined {
      if (!isObj(e)) return undefined;
      switch (e['type']) {
        case 'message_start': {
          const m = e['message'];
          if (isObj(m)) {
            if (typeof m['model'] === 'string') model = m['model'];
            merge(m['usage']);
          }
          return undefined;
        }
        case 'message_delta':
          merge(e['usage']);
          return undefined;
        case 'content_block_delta': {
          const d = e['delta'];
          if (!isObj(d)) return undefined;
          if (d['type'] === 'text_delta') return { output: typeof d['text'] === 'string' ? d['text'] : '' };
          if (d['type'] === 'input_json_delta') return { output: '' };
          if (d['type'] === 'thinking_delta') return { reasoning: typeof d['thinking'] === 'string' ? d['thinking'] : '' };
          return undefined;
        }
        default:
          return undefined;
      }
    },
    usage: () => (raw === undefined ? undefined : anthropicUsage(raw)),
    model: () => model,
  };
}
