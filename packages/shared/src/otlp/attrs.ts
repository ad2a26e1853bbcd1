import { anyValueToText, countOf } from './any-value.js';
import type { OtlpAnyValue, OtlpKeyValue } from './types.js';

/**
 * Every attribute name the mapping reads has a slot number; a span's
 * attributes are sorted into an array by slot in one pass, so each of the
 * ~60 lookups per span is an array read (a Map per span, or a scan per
 * lookup, was the largest cost of the mapping).
 */
const SLOTS = new Map<string, number>();
export function slotOf(key: string): number {
  let i = SLOTS.get(key);
  if (i === undefined) {
    i = SLOTS.size;
    SLOTS.set(key, i);
  }
  return i;
}

export class Attrs {
  private readonly vals: (OtlpAnyValue | undefined)[];

  constructor(readonly list: readonly OtlpKeyValue[]) {
    this.vals = new Array<OtlpAnyValue | undefined>(SLOTS.size);
    for (const kv of list) {
      const k = kv.key;
      if (typeof k !== 'string') continue;
      const i = SLOTS.get(k);
      // The first of repeated keys counts, as in a Map filled in order.
      if (i !== undefined && this.vals[i] === undefined && kv.value !== null && kv.value !== undefined) this.vals[i] = kv.value;
    }
  }

  get(key: string): OtlpAnyValue | undefined {
    const i = SLOTS.get(key);
    if (i !== undefined) return this.vals[i];
    for (const kv of this.list) if (kv.key === key && kv.value !== null && kv.value !== undefined) return kv.value;
    return undefined;
  }

  str(key: string): string | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    const t = anyValueToText(v);
    return t === '' ? undefined : t;
  }

  first(keys: readonly string[]): string | undefined {
    for (const k of keys) {
      const s = this.str(k);
      if (s !== undefined) return s;
    }
    return undefined;
  }

  count(keys: readonly string[]): number | undefined {
    for (const k of keys) {
      const c = countOf(this.get(k));
      if (c !== undefined) return c;
    }
    return undefined;
  }
}

export function attrs(list: readonly OtlpKeyValue[] | null | undefined): Attrs {
  return new Attrs(list ?? []);
}
