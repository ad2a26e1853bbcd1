/**
 * Exact money: USD amounts as a BigInt scaled by 10^18 (18 fractional digits).
 *
 * No amount ever passes through a binary float, so per-dimension costs add up
 * to `total_cost` exactly and sums over any number of rows do not drift.
 */

export const SCALE_DIGITS = 18;
export const SCALE = 10n ** 18n;

const MILLION = 1_000_000n;

// Plain or scientific notation: "2.5", "-0.075", ".5", "1e-7", "2.5E+3".
const DECIMAL_TEXT = /^([+-]?)(\d+)?(?:\.(\d+))?(?:[eE]([+-]?\d{1,4}))?$/;

// Bounds the size of the BigInt an exponent can create from a short string.
const MAX_EXPONENT = 1000;

/**
 * Parses a decimal number written in plain or scientific notation into the
 * scaled form. Scientific notation is accepted because it is how JavaScript
 * writes small numbers (String(1e-7) is "1e-7"), and catalog prices arrive as
 * numbers. Digits beyond the 18th fractional place are rounded half to even.
 * Anything else (empty text, whitespace, "1,5", "NaN", "Infinity", "0x10")
 * throws an Error that quotes the input.
 */
export function parseDecimal(s: string): bigint {
  const m = DECIMAL_TEXT.exec(s);
  const intDigits = m?.[2] ?? '';
  const fracDigits = m?.[3] ?? '';
  if (m === null || (intDigits === '' && fracDigits === '')) {
    throw new Error(`not a decimal number: ${JSON.stringify(s.length > 60 ? s.slice(0, 60) + '…' : s)}`);
  }
  const exponent = m[4] === undefined ? 0 : Number(m[4]);
  if (Math.abs(exponent) > MAX_EXPONENT) throw new Error(`decimal exponent out of range: ${JSON.stringify(s)}`);
  const digits = BigInt(intDigits + fracDigits);
  const shift = exponent - fracDigits.length + SCALE_DIGITS;
  const scaled = shift >= 0 ? digits * 10n ** BigInt(shift) : divRoundHalfEven(digits, 10n ** BigInt(-shift));
  return m[1] === '-' ? -scaled : scaled;
}

/**
 * The scaled form of a number from a data file. A JSON number's shortest
 * round-trip text is exactly the literal its author wrote (0.075 stays
 * "0.075"), so this recovers the intended decimal, not the float's binary
 * expansion.
 */
export function decimalFromNumber(n: number): bigint {
  if (!Number.isFinite(n)) throw new Error(`not a finite number: ${String(n)}`);
  return parseDecimal(String(n));
}

/** Canonical text: no exponent, no trailing zeros, "0" for zero. */
export function formatDecimal(v: bigint): string {
  // Most cost dimensions of most spans are zero.
  if (v === 0n) return '0';
  const sign = v < 0n ? '-' : '';
  // Splitting the digit string is several times faster than BigInt division.
  const digits = (v < 0n ? -v : v).toString().padStart(SCALE_DIGITS + 1, '0');
  const point = digits.length - SCALE_DIGITS;
  let end = digits.length;
  while (end > point && digits.charCodeAt(end - 1) === 48 /* '0' */) end--;
  const whole = digits.slice(0, point);
  return end === point ? sign + whole : sign + whole + '.' + digits.slice(point, end);
}

/** a / b rounded half to even; b must be positive. */
export function divRoundHalfEven(a: bigint, b: bigint): bigint {
  if (b <= 0n) throw new Error('divisor must be positive');
  const negative = a < 0n;
  const n = negative ? -a : a;
  let q = n / b;
  const twiceRest = (n % b) * 2n;
  if (twiceRest > b || (twiceRest === b && (q & 1n) === 1n)) q += 1n;
  return negative ? -q : q;
}

function checkCount(count: number): void {
  if (!Number.isSafeInteger(count) || count < 0) throw new Error(`a usage count must be a non-negative integer, got ${String(count)}`);
}

/**
 * Cost of `count` units at a scaled price per million units.
 *
 * Exact whenever the price has at most 12 fractional digits (every list price
 * does: 18 - 6). A price with more digits can make count × price / 10^6
 * fall between two 18-digit values; that one case is rounded half to even,
 * which keeps rounding unbiased across many rows.
 */
export function mulCountPerMillion(count: number, perMillionScaled: bigint): bigint {
  checkCount(count);
  if (count === 0 || perMillionScaled === 0n) return 0n;
  const product = BigInt(count) * perMillionScaled;
  const quotient = product / MILLION;
  return quotient * MILLION === product ? quotient : divRoundHalfEven(product, MILLION);
}

/** Cost of `count` units at a scaled price per unit; always exact. */
export function mulCountEach(count: number, eachScaled: bigint): bigint {
  checkCount(count);
  if (count === 0 || eachScaled === 0n) return 0n;
  return BigInt(count) * eachScaled;
}

/** Exact sum of decimal strings, as canonical text. */
export function sumDecimal(values: Iterable<string>): string {
  let total = 0n;
  for (const v of values) total += parseDecimal(v);
  return formatDecimal(total);
}
