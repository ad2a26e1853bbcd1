import { LIMITS } from '../fields.js';
import { codePointLength, type Metadata } from '../schema.js';

/**
 * The v1 limits applied to mapped OTLP spans: texts are cut, never refused,
 * and the cut fields are named in the `otel.truncated` metadata entry.
 */

/** Metadata entry that lists the fields cut to their v1 limit. */
export const TRUNCATED_KEY = 'otel.truncated';
/** Metadata entry that counts and names the attributes left out past the 64-entry limit. */
export const DROPPED_KEY = 'otel.dropped_attributes';

/** `s` cut to at most `max` code points; marks `field` as truncated when it was cut. */
export function fit(s: string, max: number, field: string, truncated: string[]): string {
  if (s.length <= max || codePointLength(s) <= max) return s;
  truncated.push(field);
  return cutCodePoints(s, max);
}

/** The first `max` code points of `s`, never splitting a surrogate pair. */
export function cutCodePoints(s: string, max: number): string {
  let i = 0;
  let n = 0;
  while (i < s.length && n < max) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
    n++;
  }
  return s.slice(0, i);
}

const ELLIPSIS = '\u2026';

/** A metadata key or value over its limit: cut to one code point less than the limit and ended with "…". */
function fitMeta(s: string, max: number): string {
  if (s.length <= max || codePointLength(s) <= max) return s;
  return cutCodePoints(s, max - 1) + ELLIPSIS;
}

/**
 * Builds a v1 metadata map within its limits (64 entries, keys of 128 and
 * values of 1024 code points): the first 62 entries in the order added (a
 * later duplicate key is ignored), then `otel.truncated` when a field of the
 * span or trace was cut, and `otel.dropped_attributes` with the number and
 * names of the entries left out. Keys and values over their limit are cut to
 * one code point less and ended with "…".
 */
export class MetadataBuilder {
  private readonly m: Record<string, string> = Object.create(null) as Record<string, string>;
  private n = 0;
  private readonly dropped: string[] = [];
  /** Entries kept back for the last slots (the truncation note). */
  constructor(private readonly reserved = 0) {}

  add(key: string, value: string): void {
    const k = fitMeta(key, LIMITS.metadataKeyChars);
    if (k === '' || Object.prototype.hasOwnProperty.call(this.m, k)) return;
    if (this.n >= LIMITS.metadataEntries - 1 - this.reserved) {
      this.dropped.push(k);
      return;
    }
    this.m[k] = fitMeta(value, LIMITS.metadataValueChars);
    this.n++;
  }

  build(extra?: [string, string]): Metadata | undefined {
    if (extra !== undefined) {
      this.m[extra[0]] = fitMeta(extra[1], LIMITS.metadataValueChars);
      this.n++;
    }
    if (this.dropped.length > 0) {
      this.m[DROPPED_KEY] = fitMeta(`${this.dropped.length} left out: ${this.dropped.join(', ')}`, LIMITS.metadataValueChars);
      this.n++;
    }
    // Without a prototype, so an attribute named "__proto__" is an entry like any other (as JSON.parse makes it).
    return this.n === 0 ? undefined : this.m;
  }
}
