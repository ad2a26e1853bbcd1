/**
 * How write-log segments are named on disk, for the server that writes them
 * and for `doctor`, which reads the folder without the server: one file per
 * segment, its number zero-padded, numbers consecutive (the flusher retires
 * segments oldest first), so a number missing between two others is a
 * segment that was removed before its spans were stored.
 */

export const SEGMENT_EXT = '.wal';

export function segmentName(seq: number): string {
  return `${String(seq).padStart(20, '0')}${SEGMENT_EXT}`;
}

/** The segment number of a file name, or undefined for another file. */
export function segmentSeq(name: string): number | undefined {
  if (!name.endsWith(SEGMENT_EXT)) return undefined;
  const seq = Number.parseInt(name, 10);
  return Number.isSafeInteger(seq) && seq > 0 ? seq : undefined;
}

/** Numbers missing between the first and the last of `seqs`. */
export function missingSegments(seqs: readonly number[]): number[] {
  const sorted = [...new Set(seqs)].sort((a, b) => a - b);
  const missing: number[] = [];
  for (let i = 1; i < sorted.length; i++) {
    for (let s = (sorted[i - 1] as number) + 1; s < (sorted[i] as number) && missing.length < 1000; s++) missing.push(s);
  }
  return missing;
}

/**
 * The write log's own record of the segments it should have, rewritten
 * (atomically) each time a segment is opened, sealed or retired, like
 * Kafka's recovery-point checkpoint: a missing first or last segment, which
 * leaves no gap in the numbers, is found against it, with the spans it held
 * as far as they were known (a sealed segment's count; the active one's is
 * not known until it is sealed).
 */
export const CHECKPOINT_FILE = 'checkpoint.json';

export interface WalCheckpoint {
  /** Sealed segments waiting for the store: [number, spans]. */
  segments: [number, number][];
  /** The segment being written, whose span count is not recorded. */
  active?: number | undefined;
}

export interface MissingSegment {
  seq: number;
  /** Spans it held, when the checkpoint knew them. */
  spans?: number | undefined;
  /** Where it was among the segments expected. */
  position: 'first' | 'last' | 'middle';
}

/** The checkpoint's text parsed, or undefined when it is not one. */
export function parseCheckpoint(text: string): WalCheckpoint | undefined {
  try {
    const v = JSON.parse(text) as { segments?: unknown; active?: unknown };
    if (!Array.isArray(v.segments)) return undefined;
    const segments: [number, number][] = [];
    for (const s of v.segments) {
      if (!Array.isArray(s) || !Number.isSafeInteger(s[0]) || !Number.isSafeInteger(s[1])) return undefined;
      segments.push([s[0] as number, s[1] as number]);
    }
    const active = Number.isSafeInteger(v.active) ? (v.active as number) : undefined;
    return { segments, active };
  } catch {
    return undefined;
  }
}

export function checkpointText(cp: WalCheckpoint): string {
  return `${JSON.stringify({ version: 1, segments: cp.segments, active: cp.active ?? null })}\n`;
}

/**
 * Segments the checkpoint expects and the folder lacks; without a checkpoint
 * (a log written before it existed), the numbers missing between those on disk.
 */
export function missingFromCheckpoint(cp: WalCheckpoint | undefined, onDisk: readonly number[]): MissingSegment[] {
  const present = new Set(onDisk);
  const expected: { seq: number; spans?: number | undefined }[] =
    cp === undefined
      ? missingSegments(onDisk).map((seq) => ({ seq }))
      : [...cp.segments.map(([seq, spans]) => ({ seq, spans })), ...(cp.active === undefined ? [] : [{ seq: cp.active }])];
  const all = [...new Set([...expected.map((e) => e.seq), ...onDisk])].sort((a, b) => a - b);
  const first = all[0];
  const last = all[all.length - 1];
  return expected
    .filter((e) => !present.has(e.seq))
    .sort((a, b) => a.seq - b.seq)
    .map((e) => ({ ...e, position: e.seq === first ? 'first' : e.seq === last ? 'last' : 'middle' }));
}
