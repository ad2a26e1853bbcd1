import { LIMITS } from './limits.js';

/**
 * Indices of at most `max` of `n` items, evenly spread, always the first and
 * the last.
 */
export function evenIndices(n: number, max: number = LIMITS.chunkArrayItems): number[] {
  if (n <= max) return Array.from({ length: n }, (_, i) => i);
  if (max <= 1) return max === 1 ? [n - 1] : [];
  const out: number[] = [];
  for (let k = 0; k < max; k++) out.push(Math.round((k * (n - 1)) / (max - 1)));
  return out;
}

/**
 * (offset ms, cumulative tokens) samples of a stream of any length in bounded
 * memory: every `stride`-th sample is kept, and when 2 * max are kept every
 * other one is dropped and the stride doubles, so what is kept stays evenly
 * spread. The last sample is always kept.
 */
export class ChunkSampler {
  private offsets: number[] = [];
  private tokens: number[] = [];
  private stride = 1;
  private seen = 0;
  private lastOffset = -1;
  private lastTokens = 0;

  constructor(private readonly max: number = LIMITS.chunkArrayItems) {}

  get count(): number {
    return this.seen;
  }

  get cumulative(): number {
    return this.lastTokens;
  }

  add(offsetMs: number, cumulativeTokens: number): void {
    if (this.seen % this.stride === 0) {
      this.offsets.push(offsetMs);
      this.tokens.push(cumulativeTokens);
      if (this.offsets.length >= 2 * this.max) {
        this.offsets = this.offsets.filter((_, i) => i % 2 === 0);
        this.tokens = this.tokens.filter((_, i) => i % 2 === 0);
        this.stride *= 2;
      }
    }
    this.seen++;
    this.lastOffset = offsetMs;
    this.lastTokens = cumulativeTokens;
  }

  /**
   * At most `max` samples. With `finalTokens` (the provider's count), the
   * cumulative counts are scaled so the last equals it: chunk counts are an
   * estimate, the provider's usage is the truth.
   */
  result(finalTokens?: number): { offsets: number[]; tokens: number[] } | undefined {
    if (this.seen === 0) return undefined;
    let offsets = this.offsets;
    let tokens = this.tokens;
    if ((this.seen - 1) % this.stride !== 0) {
      offsets = [...offsets, this.lastOffset];
      tokens = [...tokens, this.lastTokens];
    }
    const idx = evenIndices(offsets.length, this.max);
    let outTokens = idx.map((i) => tokens[i] ?? 0);
    const outOffsets = idx.map((i) => Math.max(0, Math.round(offsets[i] ?? 0)));
    if (finalTokens !== undefined && this.lastTokens > 0 && finalTokens !== this.lastTokens) {
      const f = finalTokens / this.lastTokens;
      outTokens = outTokens.map((t) => Math.round(t * f));
    }
    return { offsets: outOffsets, tokens: outTokens };
  }
}

/** The streaming fields of an llm span. */
export interface StreamFields {
  ttftMs?: number;
  chunkOffsets?: number[];
  chunkTokens?: number[];
  reasoningOffsets?: number[];
  reasoningChunkTokens?: number[];
  reasoningDurationMs?: number;
}

const monotonic = (): number => globalThis.performance.now();

/**
 * Times a streamed model call. Call `output()` / `reasoning()` for each chunk
 * as it arrives (with its token count when the provider tells it, else 1 per
 * chunk); `fields()` gives ttftMs (to the first chunk of either kind), the
 * sampled chunk curves and the time spent inside reasoning blocks.
 */
export class StreamTimer {
  private readonly t0: number;
  private firstMs: number | undefined;
  private readonly out = new ChunkSampler();
  private readonly reason = new ChunkSampler();
  private outTokens = 0;
  private reasonTokens = 0;
  private reasoningSince: number | undefined;
  private reasoningMs = 0;

  /**
   * @param startMonotonic performance.now() at the start of the step (the span's start), the origin of offsets
   */
  constructor(
    startMonotonic?: number,
    private readonly now: () => number = monotonic,
  ) {
    this.t0 = startMonotonic ?? now();
  }

  private stamp(): number {
    const t = this.now() - this.t0;
    this.firstMs ??= t;
    return t;
  }

  output(tokens = 1): void {
    const t = this.stamp();
    if (this.reasoningSince !== undefined) {
      this.reasoningMs += t - this.reasoningSince;
      this.reasoningSince = undefined;
    }
    this.outTokens += tokens;
    this.out.add(t, this.outTokens);
  }

  reasoning(tokens = 1): void {
    const t = this.stamp();
    this.reasoningSince ??= t;
    this.reasonTokens += tokens;
    this.reason.add(t, this.reasonTokens);
  }

  /** @param final the provider's usage, to scale the chunk estimates to */
  fields(final: { outputTokens?: number; reasoningTokens?: number } = {}): StreamFields {
    const f: StreamFields = {};
    if (this.firstMs !== undefined) f.ttftMs = Math.round(this.firstMs * 1000) / 1000;
    const o = this.out.result(final.outputTokens);
    if (o !== undefined) {
      f.chunkOffsets = o.offsets;
      f.chunkTokens = o.tokens;
    }
    const r = this.reason.result(final.reasoningTokens);
    if (r !== undefined) {
      f.reasoningOffsets = r.offsets;
      f.reasoningChunkTokens = r.tokens;
      const open = this.reasoningSince === undefined ? 0 : this.now() - this.t0 - this.reasoningSince;
      f.reasoningDurationMs = Math.max(0, Math.round(this.reasoningMs + open));
    }
    return f;
  }
}
