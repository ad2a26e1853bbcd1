import type { Usage } from '../types.js';
import { compact, isObj, minus, n, type ChunkInfo, type StreamAdapter } from './common.js';

/** `usageMetadata` of a Gemini generateContent response (REST JSON names). */
export interface GeminiUsageMetadata {
  promptTokenCount?: number | null;
  cachedContentTokenCount?: number | null;
  candidatesTokenCount?: number | null;
  thoughtsTokenCount?: number | null;
  toolUsePromptTokenCount?: number | null;
  totalTokenCount?: number | null;
}

/**
 * `promptTokenCount` includes the cached content; tool-use prompt tokens
 * (tool results fed back to the model) are input too. `candidatesTokenCount`
 * excludes thoughts, which Gemini counts apart in `thoughtsTokenCount`.
 */
export function geminiUsage(responseOrUsage: GeminiUsageMetadata | { usageMetadata?: GeminiUsageMetadata | null } | null | undefined): Usage {
  if (!isObj(responseOrUsage)) return {};
  const u = (isObj(responseOrUsage['usageMetadata']) ? responseOrUsage['usageMetadata'] : responseOrUsage) as GeminiUsageMetadata;
  const cached = n(u.cachedContentTokenCount);
  const prompt = n(u.promptTokenCount);
  const toolUse = n(u.toolUsePromptTokenCount);
  const allInput = prompt === undefined && toolUse === undefined ? undefined : (prompt ?? 0) + (toolUse ?? 0);
  return compact({
    inputTokens: minus(allInput, cached),
    cachedInputTokens: cached,
    outputTokens: n(u.candidatesTokenCount),
    reasoningTokens: n(u.thoughtsTokenCount),
    totalTokens: n(u.totalTokenCount),
  });
}

/**
 * streamGenerateContent chunks: parts with `thought: true` are reasoning
 * (thought summaries), other text parts output; each chunk's usageMetadata
 * is cumulative, the last one final.
 */
export function geminiStream(): StreamAdapter<unknown> {
  let usage: Usage | undefined;
  let model: string | undefined;
  return {
    provider: 'google',
    chunk(c): ChunkInfo | undefined {
      if (!isObj(c)) return undefined;
      if (typeof c['modelVersion'] === 'string') model = c['modelVersion'];
      let soFar: number | undefined;
      if (isObj(c['usageMetadata'])) {
        usage = geminiUsage(c['usageMetadata'] as GeminiUsageMetadata);
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
    model: () => model,
  };
}
