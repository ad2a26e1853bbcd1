/**
 * The traces stored on a few UTC days, as 32-bit fingerprints of (org, trace)
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

  /** Starts a day's set from the traces stored on it; the oldest day loaded is dropped beyond maxDays. */
  load(day: string, traces: Iterable<readonly [org: string, trace: string, firstStart: number]>): void {
    const set = new DaySet();
    for (const [org, trace, start] of traces) set.add(fingerprint(org, trace), start);
    this.days.delete(day);
    this.days.set(day, set);
    for (const old of this.days.keys()) {
      if (this.days.size <= this.maxDays) break;
      this.days.delete(old);
    }
  }

  /** Notes a trace's spans stored on a day (a day not loaded is left alone: its load reads them). */
  add(day: string, org: string, trace: string, start: number): void {
    this.days.get(day)?.add(fingerprint(org, trace), start);
  }

  /** The earliest start under the trace's fingerprint on any of `days` (all loaded), or undefined when it is on none. */
  since(days: readonly string[], org: string, trace: string): number | undefined {
    const f = fingerprint(org, trace);
    let out: number | undefined;
    for (const day of days) {
      const s = this.days.get(day)?.get(f);
      if (s !== undefined && (out === undefined || s < out)) out = s;
    }
    return out;
  }

  clear(): void {
    this.days.clear();
  }
}

/** FNV-1a over the UTF-16 code units of org, a separator and the trace id; never 0 (the empty slot). */
function fingerprint(org: string, trace: string): number {
  let h = 0x811c9dc5;
  const s = `${org}\u0000${trace}`;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0 || 1;
}

/** An open-addressing set of fingerprints, each with the earliest start seen: 12 bytes a slot, at most half full. */
class DaySet {
  private keys = new Uint32Array(1024);
  private starts = new Float64Array(1024);
  private size = 0;

  add(f: number, start: number): void {
    if ((this.size + 1) * 2 > this.keys.length) this.grow();
    const i = this.slot(f);
    if (this.keys[i] === 0) {
      this.keys[i] = f;
      this.starts[i] = start;
      this.size++;
    } else if (start < (this.starts[i] ?? start)) this.starts[i] = start;
  }

  get(f: number): number | undefined {
    const i = this.slot(f);
    return this.keys[i] === 0 ? undefined : this.starts[i];
  }

  private slot(f: number): number {
    const mask = this.keys.length - 1;
    let i = (Math.imul(f, 0x9e3779b1) >>> 0) & mask;
    while (this.keys[i] !== 0 && this.keys[i] !== f) i = (i + 1) & mask;
    return i;
  }

  private grow(): void {
    const [keys, starts] = [this.keys, this.starts];
    this.keys = new Uint32Array(keys.length * 2);
    this.starts = new Float64Array(keys.length * 2);
    this.size = 0;
    keys.forEach((k, i) => {
      if (k !== 0) this.add(k, starts[i] ?? 0);
    });
  }
}
