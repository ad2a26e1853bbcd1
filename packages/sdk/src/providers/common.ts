import type { Billing, Usage } from '../types.js';

/** A non-negative integer, or undefined for anything else (null, missing, NaN). */
export function n(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;
}

/** `a - b` clamped at 0 (a provider's detail count can exceed its total on odd responses). */
export function minus(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return undefined;
  return Math.max(0, a - (b ?? 0));
}

/** Drops the undefined fields, so a span carries only the buckets the provider reported. */
export function compact(u: Usage): Usage {
  const out: Usage = {};
  for (const [k, v] of Object.entries(u) as [keyof Usage, number | undefined][]) if (v !== undefined) out[k] = v;
  return out;
}

/** What one streamed chunk carried, as a provider adapter reads it. */
export interface ChunkInfo {
  output?: string;
  reasoning?: string;
  /** The provider's cumulative output-token count so far, when chunks carry it (Gemini). */
  outputTokensSoFar?: number;
}

/** Reads one provider's stream of chunks (events). */
export interface StreamAdapter<C> {
  readonly provider: string;
  chunk(c: C): ChunkInfo | undefined;
  /** The usage reported in the stream, mapped into our buckets; undefined when the stream carried none. */
  usage(): Usage | undefined;
  /** The service tier and region the stream reported, if any. */
  billing?(): Billing;
  model(): string | undefined;
}

export const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
