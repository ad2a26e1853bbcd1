import type { Billing, Usage } from '../types.js';
import { compact, isObj, minus, n, type ChunkInfo, type StreamAdapter } from './common.js';

/** `usageMetadata` of a Gemini generateContent response (REST JSON names). */
/** A count of one modality (`TEXT`, `AUDIO`, `IMAGE`, `VIDEO`, `DOCUMENT`). */
export interface GeminiModalityCount {
  modality?: string | null;
  tokenCount?: number | null;
}

export interface GeminiUsageMetadata {
  promptTokenCount?: number | null;
  cachedContentTokenCount?: number | null;
  candidatesTokenCount?: number | null;
  thoughtsTokenCount?: number | null;
  toolUsePromptTokenCount?: number | null;
  totalTokenCount?: number | null;
  /** The prompt, the cached content and the candidates by modality: audio is billed at its own rates. */
  promptTokensDetails?: GeminiModalityCount[] | null;
  cacheTokensDetails?: GeminiModalityCount[] | null;
  candidatesTokensDetails?: GeminiModalityCount[] | null;
  /** Vertex AI: ON_DEMAND, ON_DEMAND_FLEX, ON_DEMAND_PRIORITY, PROVISIONED_THROUGHPUT. */
  trafficType?: string | null;
}

const metadataOf = (responseOrUsage: unknown): GeminiUsageMetadata | undefined => {
  if (!isObj(responseOrUsage)) return undefined;
  return (isObj(responseOrUsage['usageMetadata']) ? responseOrUsage['usageMetadata'] : responseOrUsage) as GeminiUsageMetadata;
};

/** The audio tokens of a modality breakdown (0 when it has none). */
function audioOf(details: GeminiModalityCount[] | null | undefined): number {
  if (!Array.isArray(details)) return 0;
  let sum = 0;
  for (const d of details) if (isObj(d) && d.modality === 'AUDIO') sum += n(d.tokenCount) ?? 0;
  return sum;
}

/**
 * `promptTokenCount` includes the cached content and the audio; tool-use
 * prompt tokens (tool results fed back to the model) are input too.
 * `candidatesTokenCount` excludes thoughts, which Gemini counts apart in
 * `thoughtsTokenCount`, and includes audio output. Audio, cached or not,
 * comes from the modality breakdowns into buckets of its own.
 */
export function geminiUsage(responseOrUsage: GeminiUsageMetadata | { usageMetadata?: GeminiUsageMetadata | null } | null | undefined): Usage {
  const u = metadataOf(responseOrUsage);
  if (u === undefined) return {};
  const cached = n(u.cachedContentTokenCount);
  const prompt = n(u.promptTokenCount);
  const toolUse = n(u.toolUsePromptTokenCount);
  const allInput = prompt === undefined && toolUse === undefined ? undefined : (prompt ?? 0) + (toolUse ?? 0);
  const cachedAudio = Math.min(audioOf(u.cacheTokensDetails), cached ?? 0);
  const audioIn = Math.max(0, audioOf(u.promptTokensDetails) - cachedAudio);
  const audioOut = audioOf(u.candidatesTokensDetails);
  return compact({
    inputTokens: minus(minus(allInput, cached), audioIn),
    cachedInputTokens: cached === undefined ? undefined : cached - cachedAudio,
    audioInputTokens: audioIn === 0 ? undefined : audioIn,
    cachedAudioInputTokens: cachedAudio === 0 ? undefined : cachedAudio,
    outputTokens: minus(n(u.candidatesTokenCount), audioOut),
    audioOutputTokens: audioOut === 0 ? undefined : audioOut,
    reasoningTokens: n(u.thoughtsTokenCount),
    totalTokens: n(u.totalTokenCount),
  });
}

const TRAFFIC_TIERS: Record<string, string> = {
  ON_DEMAND: 'standard',
  ON_DEMAND_FLEX: 'flex',
  ON_DEMAND_PRIORITY: 'priority',
  PROVISIONED_THROUGHPUT: 'provisioned',
};

/** The service tier Vertex AI reports in `usageMetadata.trafficType` (flex and priority are priced apart). */
export function geminiTier(responseOrUsage: unknown): Billing {
  const t = metadataOf(responseOrUsage)?.trafficType;
  if (typeof t !== 'string' || t === 'TRAFFIC_TYPE_UNSPECIFIED') return {};
  return { serviceTier: TRAFFIC_TIERS[t] ?? t.toLowerCase() };
}

/** Everything a response says about its cost, to spread into `span.end()`: usage by bucket and service tier. */
export function geminiBilling(response: unknown): Billing & { usage: Usage } {
  return { usage: geminiUsage(response as GeminiUsageMetadata), ...geminiTier(response) };
}

/**
 * streamGenerateContent chunks: parts with `thought: true` are reasoning
 * (thought summaries), other text parts output; each chunk's usageMetadata
 * is cumulative, the last one final.
 */
export function geminiStream(): StreamAdapter<unknown> {
  let usage: Usage | undefined;
  let tier: Billing = {};
  let model: string | undefined;
  return {
    provider: 'google',
    chunk(c): ChunkInfo | undefined {
      if (!isObj(c)) return undefined;
      if (typeof c['modelVersion'] === 'string') model = c['modelVersion'];
      let soFar: number | undefined;
      if (isObj(c['usageMetadata'])) {
        usage = geminiUsage(c['usageMetadata'] as GeminiUsageMetadata);
        tier = geminiTier(c['usageMetadata']);
        soFar = n((c['usageMetadata'] as GeminiUsageMetadata).candidatesTokenCount);
      }
      const cands = c['candidates'];
      const cand = Array.isArray(cands) ? (cands[0] as unknown) : undefined;
      const content = isObj(cand) ? cand['content'] : undefined;
      const parts = isObj(content) && Array.isArray(content['parts']) ? (content['parts'] as unknown[]) : [];
      let output: string | undefined;
      let reasoning: string | undefined;
      for (const p of parts) {
        if (!isObj(p)) continue;
        const text = typeof p['text'] === 'string' ? p['text'] : '';
        if (p['thought'] === true) reasoning = (reasoning ?? '') + text;
        else if (typeof p['text'] === 'string' || isObj(p['functionCall'])) output = (output ?? '') + text;
      }
      if (output === undefined && reasoning === undefined) return undefined;
      const info: ChunkInfo = {};
      if (output !== undefined) info.output = output;
      if (reasoning !== undefined) info.reasoning = reasoning;
      if (soFar !== undefined && output !== undefined) info.outputTokensSoFar = soFar;
      return info;
    },
    usage: () => usage,
    billing: () => tier,
    model: () => model,
  };
}
