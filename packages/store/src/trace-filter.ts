/**
 * The traces (or sessions) stored on a few UTC days, as 64-bit fingerprints of (org, trace)
 * with the earliest start time seen under each: an insert asks which of its
 * traces may be stored already (none, for most batches of live traffic) and
 * since when, so its lookup reads only the rows written since then, not the
 * day. A fingerprint shared by two traces keeps the earlier start: an answer
 * may name a trace that is not stored, never miss one that is.
 *
 * Fingerprints are DuckDB's hash of the two values (fingerprintSql), computed where the rows are: a day's load then
 * takes two numbers a trace from the store, not two strings (at 2M traces in a day: ~0.7 s against ~10 s).
 */
export class TraceFilter {
  private readonly days = new Map<string, DaySet>();

  constructor(private readonly maxDays = 4) {}

  has(day: string): boolean {
    return this.days.has(day);
  }

  /**
   * Starts a day's set from the traces stored on it (columns as fingerprintSql names them, and the first starts);
   * beyond maxDays the oldest day loaded is dropped, other than those in `keep` (the days the same lookup asks about:
   * a day dropped there would answer "none").
   */
  load(day: string, traces: FingerprintColumns, keep: ReadonlySet<string> = new Set()): void {
    const { lo, hi, start } = traces;
    const set = new DaySet(lo.length);
    for (let i = 0; i < lo.length; i++) set.add(Number(lo[i]) || 1, Number(hi[i]), Number(start?.[i] ?? 0));
    this.days.delete(day);
    this.days.set(day, set);
    for (const old of this.days.keys()) {
      if (this.days.size <= this.maxDays) break;
      if (old !== day && !keep.has(old)) this.days.delete(old);
    }
  }

  /** Notes a trace's spans stored on a day (a day not loaded is left alone: its load reads them). */
  add(day: string, fp: Fingerprint, start: number): void {
    this.days.get(day)?.add(fp.lo || 1, fp.hi, start);
  }

  /** The earliest start under the trace's fingerprint on any of `days` (all loaded), or undefined when it is on none. */
  since(days: readonly string[], fp: Fingerprint): number | undefined {
    let out: number | undefined;
    for (const day of days) {
      const s = this.days.get(day)?.get(fp.lo || 1, fp.hi);
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

/** A fingerprint's low and high 32 bits (the low half 0 stands for 1: 0 marks an empty slot). */
export interface Fingerprint {
  lo: number;
  hi: number;
}

/** A day's fingerprints as columns (see DuckDbFile.columns), with each one's earliest start, or none (0). */
export interface FingerprintColumns {
  lo: readonly unknown[];
  hi: readonly unknown[];
  start?: readonly unknown[] | undefined;
}

/**
 * The select-list items of the fingerprint of (`org`, `id`) (SQL expressions): `fp_lo` and `fp_hi`, the halves of
 * DuckDB's 64-bit hash of the two. The same in every table and process of one DuckDB release; a filter lives in one.
 */
export function fingerprintSql(org: string, id: string): string {
  const h = `hash(${org}, ${id})`;
  return `(${h} & 4294967295)::UINTEGER AS fp_lo, (${h} >> 32)::UINTEGER AS fp_hi`;
}

/** A row's fingerprint, read from the columns fingerprintSql names. */
export const fingerprintOf = (r: { fp_lo?: unknown; fp_hi?: unknown }): Fingerprint => ({ lo: Number(r.fp_lo), hi: Number(r.fp_hi) });

/** An open-addressing set of 64-bit fingerprints, each with the earliest start seen: 16 bytes a slot, at most half full. */
class DaySet {
  private los: Uint32Array;
  private his: Uint32Array;
  private starts: Float64Array;
  private size = 0;

  /** `expected`: about how many adds a day's load makes, so the set is sized for them once, not grown to them in doublings. */
  constructor(expected = 0) {
    let slots = 1024;
    while (slots < expected) slots *= 2;
    this.los = new Uint32Array(slots);
    this.his = new Uint32Array(slots);
    this.starts = new Float64Array(slots);
  }

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
