import { COST_COLUMNS } from '@trace-ingest/shared/rows';

/**
 * The canonical line form rewritten for old servers (see `unquotedDecimals`
 * in clickhouse-versions.ts).
 */

// In table order, as both line forms write them: contiguous, `"<name>":"<decimal>"`, the write log's lines leaving out
// the zero ones (every cost column ends in `_cost`, and no other column does).
const COST_KEYS = COST_COLUMNS.map((c) => Buffer.from(`"${c}":"`));
const COST_TAIL = Buffer.from('_cost":"');
const QUOTE = 0x22;
const COMMA = 0x2c;
const NEWLINE = 0x0a;

function bytesAt(buf: Buffer, at: number, want: Buffer): boolean {
  if (at + want.length > buf.length) return false;
  for (let i = 0; i < want.length; i++) if (buf[at + i] !== want[i]) return false;
  return true;
}

/** The index in COST_KEYS, from `from` on, of the cost key at `at`, or -1. */
function costKeyAt(buf: Buffer, at: number, from: number): number {
  for (let k = from; k < COST_KEYS.length; k++) if (bytesAt(buf, at, COST_KEYS[k] as Buffer)) return k;
  return -1;
}

/**
 * 18.x reads a Decimal only from a bare JSON number, while the lines
 * carry costs as strings (no float ever touches money). Drops the quotes
 * around the cost values of each line and touches nothing else.
 *
 * A match is structural: in JSON text an unescaped `":"` only follows a key,
 * and only column names are keys, so no string value can fake one. Per line it
 * costs one native search for a cost key's tail, a short byte walk over the
 * costs, and one memchr to the newline (JSON text has no raw newline inside
 * strings): the long text columns are never walked in JS. A line with no cost
 * key lets the search run on into the next line, which is where its match is.
 */
export function unquoteCosts(lines: Buffer): Buffer;
export function unquoteCosts(lines: string): string;
export function unquoteCosts(lines: Buffer | string): Buffer | string {
  if (typeof lines === 'string') return unquoteCosts(Buffer.from(lines, 'utf8')).toString('utf8');
  const cuts: number[] = [];
  const len = lines.length;
  let pos = 0;
  while (pos < len) {
    const tail = lines.indexOf(COST_TAIL, pos);
    if (tail < 0) break;
    // Back to the key's opening quote: a column name holds no quote.
    let p = lines.lastIndexOf(QUOTE, tail - 1);
    for (let k = 0; p >= 0;) {
      k = costKeyAt(lines, p, k);
      if (k < 0) break;
      const open = p + (COST_KEYS[k] as Buffer).length - 1;
      let q = open + 1;
      if (lines[q] === 0x2d) q++;
      const digits = q;
      for (let b = lines[q]; b !== undefined && ((b >= 0x30 && b <= 0x39) || b === 0x2e); b = lines[++q]);
      if (q === digits || lines[q] !== QUOTE) break;
      cuts.push(open, q);
      p = q + 1;
      if (lines[p] !== COMMA) break;
      p++;
      k++;
    }
    const nl = lines.indexOf(NEWLINE, Math.max(p, tail));
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
