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
