/**
 * Nesting guard for raw JSON bytes, run before JSON.parse: a body of millions
 * of `[` is small on the wire but makes JSON.parse build millions of nested
 * arrays, so it has to be refused without being parsed.
 */

// The deepest v1 payload is 6 levels (root → traces → trace → spans → span → usage/rateLimit/metadata/chunk array);
// 32 leaves ample headroom while keeping what JSON.parse may build trivially shallow.
export const MAX_JSON_DEPTH = 32;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
/**
 * Bytes of a string looked at in JS before memchr: most strings of a body are keys, ids and names that end within
 * them, and a native call per such string costs more than walking it.
 */
const NEAR_BYTES = 24;

/**
 * True as soon as arrays/objects nest deeper than `maxDepth` (a top-level
 * `[]` is depth 1). Brackets inside strings do not count. It answers only
 * "too deep": any other malformation returns false and is left to JSON.parse.
 *
 * Sound for invalid JSON too: JSON.parse stops at its first error, and on the
 * valid prefix before it this count is exact, so JSON.parse can never nest
 * deeper than what is counted here.
 */
export function exceedsDepth(body: Buffer, maxDepth: number): boolean {
  const n = body.length;
  let depth = 0;
  let i = 0;
  while (i < n) {
    const c = body[i] as number;
    if (c === QUOTE) {
      // Most bytes of a real body are string contents (prompts, outputs), so
      // past its first bytes a string is skipped with memchr rather than walked
      // byte by byte. UTF-8 continuation bytes are >= 0x80, so a 0x22 byte is
      // always a real quote.
      const open = i;
      let q = open + 1;
      const near = Math.min(n, q + NEAR_BYTES);
      while (q < near && body[q] !== QUOTE) q++;
      if (q === near) q = body.indexOf(QUOTE, q);
      for (;;) {
        if (q === -1) return false;
        let k = q - 1;
        while (k > open && body[k] === BACKSLASH) k--;
        // An odd run of backslashes escapes the quote; an even run is escaped backslashes.
        if (((q - 1 - k) & 1) === 0) {
          i = q + 1;
          break;
        }
        q = body.indexOf(QUOTE, q + 1);
      }
      continue;
    }
    if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > maxDepth) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      // A closer with nothing open means JSON.parse has already failed by here.
      if (depth === 0) return false;
      depth--;
    }
    i++;
  }
  return false;
}
