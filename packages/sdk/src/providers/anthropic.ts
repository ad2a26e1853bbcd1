import type { Billing, Usage } from '../types.js';
import { compact, isObj, minus, n, type ChunkInfo, type StreamAdapter } from './common.js';

/** `usage` of an Anthropic Messages response. */
export interface AnthropicUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  /** The cache writes by lifetime: `cache_creation_input_tokens` is their sum. */
  cache_creation?: { ephemeral_5m_input_tokens?: number | null; ephemeral_1h_input_tokens?: number | null } | null;
  server_tool_use?: { web_search_requests?: number | null } | null;
  /** `standard`, `priority` or `batch` (a Message Batches result). */
  service_tier?: string | null;
  /** Where inference ran: `us` (US-only inference) or `global`. */
  inference_geo?: string | null;
}

const usageOf = (responseOrUsage: unknown): AnthropicUsage | undefined => {
  if (!isObj(responseOrUsage)) return undefined;
  return (isObj(responseOrUsage['usage']) ? responseOrUsage['usage'] : responseOrUsage) as AnthropicUsage;
};

/**
 * `input_tokens` already exclude cache reads and writes, so each count maps
 * to its bucket as is; cache writes split by lifetime (one-hour writes are
 * billed at 2x input, five-minute ones at 1.25x); server-side web searches
 * are priced per search.
 */
export function anthropicUsage(responseOrUsage: AnthropicUsage | { usage?: AnthropicUsage | null } | null | undefined): Usage {
  const u = usageOf(responseOrUsage);
  if (u === undefined) return {};
  const searches = n(u.server_tool_use?.web_search_requests);
  const writes = n(u.cache_creation_input_tokens);
  const oneHour = n(u.cache_creation?.ephemeral_1h_input_tokens);
  return compact({
    inputTokens: n(u.input_tokens),
    cachedInputTokens: n(u.cache_read_input_tokens),
    // The five-minute writes: what the one-hour writes leave of the total (the total is the billed count;
    // a breakdown that does not add up to it, as in the API reference's example, is not trusted over it).
    cacheWriteInputTokens: writes === undefined ? n(u.cache_creation?.ephemeral_5m_input_tokens) : minus(writes, oneHour),
    cacheWrite1hInputTokens: oneHour === 0 ? undefined : oneHour,
    outputTokens: n(u.output_tokens),
    webSearchCount: searches === 0 ? undefined : searches,
  });
}

/** The service tier and inference geography a Messages response reports (priced apart: batch, priority, US-only). */
export function anthropicTier(responseOrUsage: unknown): Billing {
  const u = usageOf(responseOrUsage);
  const out: Billing = {};
  if (typeof u?.service_tier === 'string') out.serviceTier = u.service_tier;
  if (typeof u?.inference_geo === 'string') out.region = u.inference_geo;
  return out;
}

/** Everything a Messages response says about its cost, to spread into `span.end()`: usage, service tier, region. */
export function anthropicBilling(response: unknown): Billing & { usage: Usage } {
  return { usage: anthropicUsage(response as AnthropicUsage), ...anthropicTier(response) };
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
    billing: () => anthropicTier(raw),
    model: () => model,
  };
}
