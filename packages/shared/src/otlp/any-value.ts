import type { Int64Like, OtlpAnyValue } from './types.js';

/** OTLP values (AnyValue, 64-bit integers, ids) as plain JS values. */

const TWO_32 = 4294967296;

/** An OTLP 64-bit integer as a JS number (exact up to 2^53), or undefined. */
export function int64ToNumber(v: Int64Like | null | undefined): number | undefined {
  if (v === null || v === undefined) return undefined;
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'string') {
    if (!/^-?\d+$/.test(v.trim())) return undefined;
    return Number(v);
  }
  const high = v.unsigned === true ? v.high >>> 0 : v.high | 0;
  return high * TWO_32 + (v.low >>> 0);
}

/**
 * Nanoseconds since the epoch to whole milliseconds, exactly (a nanosecond
 * timestamp is past 2^53, so plain division could round across a
 * millisecond boundary).
 */
export function nanosToMillis(v: Int64Like | null | undefined): number | undefined {
  if (v === null || v === undefined) return undefined;
  let ns: bigint;
  try {
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return undefined;
      ns = BigInt(Math.trunc(v));
    } else if (typeof v === 'string') {
      if (!/^\d+$/.test(v.trim())) return undefined;
      ns = BigInt(v.trim());
    } else {
      ns = (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
      if (v.unsigned !== true && (v.high | 0) < 0) return undefined;
    }
  } catch {
    return undefined;
  }
  if (ns < 0n) return undefined;
  return Number(ns / 1_000_000n);
}

export function hex(b: Uint8Array | null | undefined): string {
  if (b === null || b === undefined || b.length === 0) return '';
  // The protobuf decoder gives Buffers; a view is made only for other byte arrays.
  return (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)).toString('hex');
}

export function allZero(b: Uint8Array): boolean {
  for (const x of b) if (x !== 0) return false;
  return true;
}

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/**
 * The member of the AnyValue oneof that is set. A decoded message has the
 * members' defaults on its prototype and the set one as an own property (the
 * decoder's `value` getter finds it the same way, but lists all keys on every
 * call: it was the largest cost of the mapping); a plain object has only
 * what was sent.
 */
function oneofName(v: OtlpAnyValue): string | undefined {
  if (hasOwn(v, 'stringValue') && v.stringValue !== null && v.stringValue !== undefined) return 'stringValue';
  if (hasOwn(v, 'intValue') && v.intValue !== null && v.intValue !== undefined) return 'intValue';
  if (hasOwn(v, 'doubleValue') && v.doubleValue !== null && v.doubleValue !== undefined) return 'doubleValue';
  if (hasOwn(v, 'boolValue') && v.boolValue !== null && v.boolValue !== undefined) return 'boolValue';
  if (hasOwn(v, 'arrayValue') && v.arrayValue !== null && v.arrayValue !== undefined) return 'arrayValue';
  if (hasOwn(v, 'kvlistValue') && v.kvlistValue !== null && v.kvlistValue !== undefined) return 'kvlistValue';
  if (hasOwn(v, 'bytesValue') && v.bytesValue !== null && v.bytesValue !== undefined) return 'bytesValue';
  return undefined;
}

/** An AnyValue as plain JSON data (int64 beyond 2^53 as a decimal string). */
export function anyValueToJs(v: OtlpAnyValue | null | undefined, depth = 0): unknown {
  if (v === null || v === undefined || depth > 32) return null;
  switch (oneofName(v)) {
    case 'stringValue':
      return v.stringValue ?? '';
    case 'boolValue':
      return v.boolValue === true;
    case 'intValue': {
      const n = int64ToNumber(v.intValue);
      if (n !== undefined && Number.isSafeInteger(n)) return n;
      return typeof v.intValue === 'object' && v.intValue !== null ? longToString(v.intValue) : String(v.intValue);
    }
    case 'doubleValue':
      return v.doubleValue ?? 0;
    case 'arrayValue':
      return (v.arrayValue?.values ?? []).map((x) => anyValueToJs(x, depth + 1));
    case 'kvlistValue': {
      const o: Record<string, unknown> = {};
      for (const kv of v.kvlistValue?.values ?? []) if (typeof kv.key === 'string') o[kv.key] = anyValueToJs(kv.value, depth + 1);
      return o;
    }
    case 'bytesValue':
      return v.bytesValue === null || v.bytesValue === undefined ? '' : Buffer.from(v.bytesValue).toString('base64');
    default:
      return null;
  }
}

function longToString(v: { low: number; high: number; unsigned?: boolean }): string {
  const u = (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
  return (v.unsigned !== true && (v.high | 0) < 0 ? u - (1n << 64n) : u).toString();
}

/** An AnyValue as text: strings as they are, everything else as JSON. */
export function anyValueToText(v: OtlpAnyValue | null | undefined): string {
  const js = anyValueToJs(v);
  if (typeof js === 'string') return js;
  if (js === null) return '';
  return typeof js === 'object' ? JSON.stringify(js) : String(js);
}

/** A token count: a non-negative integer (an integral double, or a numeric string, is taken too). */
export function countOf(v: OtlpAnyValue | undefined): number | undefined {
  if (v === undefined) return undefined;
  const js = anyValueToJs(v);
  const n = typeof js === 'number' ? js : typeof js === 'string' && /^\s*\d+(\.0*)?\s*$/.test(js) ? Number(js) : Number.NaN;
  if (!Number.isFinite(n) || n < 0 || !Number.isSafeInteger(Math.floor(n))) return undefined;
  return Math.floor(n);
}
