/**
 * The traces (or sessions) stored on a few UTC days, as 64-bit fingerprints of (org, trace)
 * with the earliest start time seen under each: an insert asks which of its
 * traces may be stored already (none, for most batches of live traffic) and
 * since when, so its lookup reads only the rows written since then, not the
 * day. A fingerprint shared by two traces keeps the earlier start: an answer
 * may name a trace that is not stored, never miss one that is.
 */
export class TraceFilter {
  private readonly days = new Map<string, DaySet>();

  constructor(private readonly maxDays = 4) {}

  has(day: string): boolean {
    return this.days.has(day);
  }

  /**
   * Starts a day's set from the traces stored on it; beyond maxDays the oldest day loaded is dropped,
   * other than those in `keep` (the days the same lookup asks about: a day dropped there would answer "none").
   */
  load(day: string, traces: Iterable<readonly [org: string, trace: string, firstStart: number]>, keep: ReadonlySet<string> = new Set()): void {
    const set = new DaySet();
    for (const [org, trace, start] of traces) {
      fingerprint(org, trace);
      set.add(FP[0] as number, FP[1] as number, start);
    }
    this.days.delete(day);
    this.days.set(day, set);
    for (const old of this.days.keys()) {
      if (this.days.size <= this.maxDays) break;
      if (old !== day && !keep.has(old)) this.days.delete(old);
    }
  }

  /** Notes a trace's spans stored on a day (a day not loaded is left alone: its load reads them). */
  add(day: string, org: string, trace: string, start: number): void {
    const set = this.days.get(day);
    if (set === undefined) return;
    fingerprint(org, trace);
    set.add(FP[0] as number, FP[1] as number, start);
  }

  /** The earliest start under the trace's fingerprint on any of `days` (all loaded), or undefined when it is on none. */
  since(days: readonly string[], org: string, trace: string): number | undefined {
    fingerprint(org, trace);
    const [lo, hi] = [FP[0] as number, FP[1] as number];
    let out: number | undefined;
    for (const day of days) {
      const s = this.days.get(day)?.get(lo, hi);
      if (s !== undefined && (out === undefined || s < out)) out = s;
    }
    return out;
  }

  /** Whether no day is loaded. */
  get empty(): boolean {
    return this.days.size === 0;
  }

  /** The days loaded from `lo` to `hi` (day texts). */
  loadedBetween(lo: string, hi: string): string[] {
    return [...this.days.keys()].filter((day) => day >= lo && day <= hi);
  }

  /** Drops the sets of the days from `lo` to `hi`: their next use loads them again from what is stored. */
  forgetBetween(lo: string, hi: string): void {
    for (const day of this.loadedBetween(lo, hi)) this.days.delete(day);
  }

  clear(): void {
    this.days.clear();
  }
}

/** The last fingerprint computed: its low and high 32 bits (one array, so the hot path allocates nothing). */
const FP = new Uint32Array(2);

/**
 * Two 32-bit hashes of org, a separator and the trace id (FNV-1a and a
 * multiply-xorshift of another seed) into FP, the low half never 0 (the empty
 * slot): 64 bits, so that a day of millions of traces almost never answers a
 * new trace with one not stored, whose lookup would read the day's traces
 * since that one's start.
 */
function fingerprint(org: string, trace: string): void {
  let h = 0x811c9dc5;
  let g = 0x9747b28c;
  const s = `${org}\u0000${trace}`;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h ^= c;
    h = Math.imul(h, 0x01000193);
    g = Math.imul(g ^ c, 0x5bd1e995);
    g ^= g >>> 15;
  }
  g = Math.imul(g ^ (g >>> 13), 0xc2b2ae35);
  FP[0] = h >>> 0 || 1;
  FP[1] = (g ^ (g >>> 16)) >>> 0;
}

/** An open-addressing set of 64-bit fingerprints, each with the earliest start seen: 16 bytes a slot, at most half full. */
class DaySet {
  private los = new Uint32Array(1024);
  private his = new Uint32Array(1024);
  private starts = new Float64Array(1024);
  private size = 0;

  add(lo: number, hi: number, start: number): void {
    if ((this.size + 1) * 2 > this.los.length) this.grow();
    const i = this.slot(lo, hi);
    if (this.los[i] === 0) {
      this.los[i] = lo;
      this.his[i] = hi;
      this.starts[i] = start;
      this.size++;
    } else if (start < (this.starts[i] ?? start)) this.starts[i] = start;
  }

  get(lo: number, hi: number): number | undefined {
    const i = this.slot(lo, hi);
    return this.los[i] === 0 ? undefined : this.starts[i];
  }

  private slot(lo: number, hi: number): number {
    const mask = this.los.length - 1;
    let i = (Math.imul(lo, 0x9e3779b1) >>> 0) & mask;
    while (this.los[i] !== 0 && (this.los[i] !== lo || this.his[i] !== hi)) i = (i + 1) & mask;
    return i;
  }

  private grow(): void {
    const [los, his, starts] = [this.los, this.his, this.starts];
    this.los = new Uint32Array(los.length * 2);
    this.his = new Uint32Array(los.length * 2);
    this.starts = new Float64Array(los.length * 2);
    this.size = 0;
    los.forEach((lo, i) => {
      if (lo !== 0) this.add(lo, his[i] ?? 0, starts[i] ?? 0);
    });
  }
}
