import { COST_COLUMNS } from '@trace-ingest/shared/rows';

/**
 * The canonical line form rewritten for old servers (see `unquotedDecimals`
 * in clickhouse-versions.ts).
 */

// In table order, as encodeRow writes them: contiguous, `"<name>":"<decimal>"`.
const COST_KEYS = COST_COLUMNS.map((c) => Buffer.from(`"${c}":"`));
const FIRST_COST = COST_KEYS[0] as Buffer;
const QUOTE = 0x22;
const COMMA = 0x2c;
const NEWLINE = 0x0a;

function bytesAt(buf: Buffer, at: number, want: Buffer): boolean {
  if (at + want.length > buf.length) return false;
  for (let i = 0; i < want.length; i++) if (buf[at + i] !== want[i]) return false;
  return true;
}

/**
 * 18.x reads a Decimal only from a bare JSON number, while the canonical line
 * carries costs as strings (no float ever touches money). Drops the quotes
 * around the cost values of each line and touches nothing else.
 *
 * A match is structural: in JSON text an unescaped `":"` only follows a key,
 * and only column names are keys, so no string value can fake one. Per line it
 * costs one native search for the first cost key, a short byte walk over the
 * nine costs, and one memchr to the newline (JSON text has no raw newline
 * inside strings): the long text columns are never walked in JS.
 */
export function unquoteCosts(lines: Buffer): Buffer;
export function unquoteCosts(lines: string): string;
export function unquoteCosts(lines: Buffer | string): Buffer | string {
  if (typeof lines === 'string') return unquoteCosts(Buffer.from(lines, 'utf8')).toString('utf8');
  const cuts: number[] = [];
  const len = lines.length;
  let pos = 0;
  while (pos < len) {
    const at = lines.indexOf(FIRST_COST, pos);
    if (at < 0) break;
    let p = at;
    for (let k = 0; k < COST_KEYS.length; k++) {
      const key = COST_KEYS[k] as Buffer;
      if (k > 0) {
        if (lines[p] !== COMMA) break;
        p++;
      }
      if (!bytesAt(lines, p, key)) break;
      const open = p + key.length - 1;
      let q = open + 1;
      if (lines[q] === 0x2d) q++;
      const digits = q;
      for (let b = lines[q]; b !== undefined && ((b >= 0x30 && b <= 0x39) || b === 0x2e); b = lines[++q]);
      if (q === digits || lines[q] !== QUOTE) break;
      cuts.push(open, q);
      p = q + 1;
    }
    const nl = lines.indexOf(NEWLINE, p);
    pos = nl < 0 ? len : nl + 1;
  }
  if (cuts.length === 0) return lines;
  const out = Buffer.allocUnsafe(len - cuts.length);
  let w = 0;
  let from = 0;
  for (const cut of cuts) {
    // Between two quotes of one line lie a few bytes: a native copy per gap costs more than the bytes.
    if (cut - from < 64) while (from < cut) out[w++] = lines[from++] as number;
    else w += lines.copy(out, w, from, cut);
    from = cut + 1;
  }
  lines.copy(out, w, from);
  return out;
}
