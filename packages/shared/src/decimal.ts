/**
 * Exact money: USD amounts as BigInt scaled by 10^18 (18 fractional digits).
 * No binary float ever holds a cost; sums of any number of rows are exact.
 */

export const SCALE_DIGITS = 18;
const DECIMAL = /^([+-])?(\d+)?(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

/**
 * Parses a decimal string (or a number, via its shortest round-trip text) to
 * the scaled form. More than 18 fractional digits are rounded half-even.
 */
export function parseDecimal(input: string | number): bigint {
  const text = typeof input === 'number' ? numberText(input) : input.trim();
  const m = DECIMAL.exec(text);
  if (m === null || (m[2] === undefined && (m[3] === undefined || m[3] === ''))) {
    throw new Error(`not a decimal number: ${JSON.stringify(text.slice(0, 40))}`);
  }
  const [, sign, intPart = '', fracPart = '', expPart] = m;
  const exp = expPart === undefined ? 0 : Number(expPart);
  if (!Number.isSafeInteger(exp) || Math.abs(exp) > 100) throw new Error(`exponent out of range: ${text}`);
  // digits × 10^(exp - fracLen) × 10^18
  const digits = BigInt((intPart + fracPart).replace(/^0+(?=\d)/, '') || '0');
  const shift = exp - fracPart.length + SCALE_DIGITS;
  const scaled = shift >= 0 ? digits * 10n ** BigInt(shift) : divRoundHalfEven(digits, 10n ** BigInt(-shift));
  return sign === '-' ? -scaled : scaled;
}

function numberText(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`not a finite number: ${n}`);
  return String(n);
}

/** Canonical text: no exponent, no trailing zeros, "0" for zero. */
export function formatDecimal(v: bigint): string {
  // Most cost dimensions of most spans are zero.
  if (v === 0n) return '0';
  const neg = v < 0n;
  // One conversion to digits, cut at the point, instead of a BigInt division and remainder.
  const digits = (neg ? -v : v).toString();
  const point = digits.length - SCALE_DIGITS;
  let end = digits.length;
  while (end > point && digits.charCodeAt(end - 1) === 48) end--;
  const int = point > 0 ? digits.slice(0, point) : '0';
  const text = end === point ? int : point >= 0 ? `${int}.${digits.slice(point, end)}` : `0.${'0'.repeat(-point)}${digits.slice(0, end)}`;
  return neg ? `-${text}` : text;
}

/** a / b rounded half to even (b > 0). */
export function divRoundHalfEven(a: bigint, b: bigint): bigint {
  const neg = a < 0n;
  const n = neg ? -a : a;
  let q = n / b;
  const r = n % b;
  // Prices have few decimals: most divisions are exact.
  if (r === 0n) return neg ? -q : q;
  const twice = r * 2n;
  if (twice > b || (twice === b && q % 2n === 1n)) q += 1n;
  return neg ? -q : q;
}

/** Cost of `count` units at a price per million units (scaled), exact to 18 digits. */
export function costPerMillion(count: number, perMillion: bigint): bigint {
  if (count === 0 || perMillion === 0n) return 0n;
  return divRoundHalfEven(BigInt(count) * perMillion, 1_000_000n);
}

/** Cost of `count` units at a price per unit (scaled). */
export function costEach(count: number, each: bigint): bigint {
  // Most spans count no images, searches or requests.
  return count === 0 ? 0n : BigInt(count) * each;
}

/** Exact sum of decimal strings. */
export function sumDecimals(values: Iterable<string>): string {
  let total = 0n;
  for (const v of values) total += parseDecimal(v);
  return formatDecimal(total);
}
