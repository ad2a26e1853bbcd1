/**
 * Values into ClickHouse SQL. 18.16 has no server-side query parameters, so
 * every value that reaches a statement goes through `sqlLiteral`.
 */

/** A ClickHouse string literal. Backslash escapes, so `\` and `'` cannot end it early. */
export function quoteString(s: string): string {
  let out = "'";
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let esc: string | undefined;
    if (c === 0x27) esc = "\\'";
    else if (c === 0x5c) esc = '\\\\';
    else if (c < 0x20 || c === 0x7f)
      esc = c === 0x0a ? '\\n' : c === 0x0d ? '\\r' : c === 0x09 ? '\\t' : c === 0 ? '\\0' : `\\x${c.toString(16).padStart(2, '0')}`;
    if (esc !== undefined) {
      out += s.slice(from, i) + esc;
      from = i + 1;
    }
  }
  return out + s.slice(from) + "'";
}

/** A backquoted identifier, for names the service itself chooses (database names). */
export function quoteIdentifier(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`not a plain identifier: ${JSON.stringify(name)}`);
  return '`' + name + '`';
}

/**
 * One bound value as SQL. Negative numbers are parenthesised so that `x-?`
 * never turns into a `--` comment; dates become epoch ms like the table's times.
 */
export function sqlLiteral(v: unknown): string {
  if (v === null) return 'NULL';
  switch (typeof v) {
    case 'string':
      return quoteString(v);
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`cannot bind ${v}`);
      return v < 0 || Object.is(v, -0) ? `(${v})` : String(v);
    case 'bigint':
      return v < 0n ? `(${v})` : String(v);
    case 'boolean':
      return v ? '1' : '0';
    default:
      if (Array.isArray(v)) return `[${v.map(sqlLiteral).join(', ')}]`;
      if (v instanceof Date) {
        const ms = v.getTime();
        if (!Number.isFinite(ms)) throw new TypeError('cannot bind an invalid Date');
        return sqlLiteral(ms);
      }
      throw new TypeError(`cannot bind a value of type ${v === undefined ? 'undefined' : typeof v}`);
  }
}

/**
 * Replaces each `?` placeholder with the escaped literal of the next param.
 * A `?` inside a string literal, a quoted identifier or a comment is text,
 * not a placeholder. The counts must match exactly.
 */
export function bindParams(sql: string, params: readonly unknown[] = []): string {
  let out = '';
  let from = 0;
  let n = 0;
  const len = sql.length;
  for (let i = 0; i < len; i++) {
    const ch = sql[i];
    if (ch === "'" || ch === '"' || ch === '`') {
      // Quoted text ends at the next unescaped quote; a doubled quote is an escape too
      // and is handled by leaving and re-entering.
      i++;
      while (i < len && sql[i] !== ch) i += sql[i] === '\\' ? 2 : 1;
      if (i >= len) throw new Error(`unterminated ${ch} in query`);
    } else if (ch === '-' && sql[i + 1] === '-') {
      const nl = sql.indexOf('\n', i);
      i = nl < 0 ? len : nl;
    } else if (ch === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      if (end < 0) throw new Error('unterminated /* comment in query');
      i = end + 1;
    } else if (ch === '?') {
      if (n >= params.length) throw new Error(`query has more ? placeholders than the ${params.length} parameter(s) given`);
      out += sql.slice(from, i) + sqlLiteral(params[n++]);
      from = i + 1;
    }
  }
  if (n !== params.length) throw new Error(`query has ${n} ? placeholder(s) but ${params.length} parameter(s) were given`);
  return out + sql.slice(from);
}

/**
 * ORDER BY keys for a cost (a non-negative Decimal), largest first. 18.16
 * compares a Decimal very slowly wherever it is not the only sort key, so the cost is
 * ordered by its Float64 (which never orders two costs the wrong way round,
 * only ties close ones), then exactly by its text behind the length of its
 * whole part (text compares as the number does then).
 */
export function costDescending(expr: string): string {
  return `toFloat64(${expr}) DESC, concat(toString(length(toString(toInt64(${expr}))) + 10), toString(${expr})) DESC`;
}
