import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { SPAN_COLUMNS, type SpanRow } from '@trace-ingest/shared/rows';
import type { QueryRow } from './span-store.js';

/**
 * Stored span rows to and from either store's SQL and driver values: the
 * select list that reads them exactly, and the canonical SpanRow they decode to.
 */

/** A store's decimal text in formatDecimal's form (no trailing zeros, no '-0'), without a round trip through bigint. */
export function decimalText(s: string): string {
  if (!/^-?\d+(\.\d+)?$/.test(s)) return formatDecimal(parseDecimal(s));
  let t = s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
  t = t.replace(/^(-?)0+(?=\d)/, '$1');
  return t === '-0' ? '0' : t;
}

/** Every stored column, with decimals and dates as text (the store's `text` cast) so they survive either store's driver exactly. */
export function storedColumns(dialect: { text(expr: string): string }): string {
  return SPAN_COLUMNS.map(([n, k]) => (k === 'decimal' || k === 'date' ? `${dialect.text(n)} AS ${n}` : n)).join(', ');
}

/** A stored row (as a store returns it) back in the canonical SpanRow form. */
export function storedToRow(r: QueryRow, only?: readonly string[]): SpanRow {
  const out: Record<string, unknown> = {};
  for (const [name, kind] of SPAN_COLUMNS) {
    if (only !== undefined && !only.includes(name)) continue;
    const v = r[name];
    switch (kind) {
      case 'int':
        out[name] = Number(v);
        break;
      case 'nullable_int':
      case 'nullable_float':
        out[name] = v === null || v === undefined ? null : Number(v);
        break;
      case 'decimal':
        out[name] = decimalText(String(v));
        break;
      case 'bool':
        out[name] = v === true || v === 1 || v === '1' || v === 'true';
        break;
      case 'date':
        out[name] = String(v).slice(0, 10);
        break;
      case 'int_array':
        out[name] = (v as unknown[]).map(Number);
        break;
      case 'string_array':
        out[name] = (v as unknown[]).map(String);
        break;
      case 'string':
        out[name] = String(v ?? '');
        break;
    }
  }
  return out as unknown as SpanRow;
}
