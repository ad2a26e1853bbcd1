import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';

/**
 * Money for the eye: to the cent plus two more decimals ($12.3457, $0.0441),
 * or two significant digits for amounts under a cent ($0.0000025), rounded
 * half up on the exact decimal (never through a float), trailing zeros
 * beyond the cent dropped. Figures read side by side (a column, a pair)
 * share one precision, the most any of them needs: $0.1700, $0.1690 and
 * $0.1682, never $0.17 beside $0.1682. The exact value is in each cell's
 * title and data-value, and in every CSV.
 */

const SCALE_DIGITS = 18;

function parse(exact: string): bigint | undefined {
  try {
    return parseDecimal(exact);
  } catch {
    return undefined;
  }
}

/** |v| rounded half up to `decimals` places, scaled. */
function rounded(abs: bigint, decimals: number): bigint {
  const unit = 10n ** BigInt(SCALE_DIGITS - decimals);
  return ((abs + unit / 2n) / unit) * unit;
}

/** The decimals an amount shows alone: 4 from a cent up, else 2 significant digits, then no trailing zeros past the cent. */
export function decimalsFor(exact: string): number {
  const v = parse(exact);
  if (v === undefined || v === 0n) return 2;
  const abs = v < 0n ? -v : v;
  // 18 fractional digits in the scaled integer; keep 4 decimals from a cent up, else 2 significant digits.
  const wanted = abs < 10n ** 16n ? Math.min(SCALE_DIGITS, SCALE_DIGITS - abs.toString().length + 2) : 4;
  const frac = formatDecimal(rounded(abs, wanted)).split('.')[1] ?? '';
  return Math.max(2, frac.length);
}

/** One precision for figures read together: the most any of them needs. */
export function sharedDecimals(values: Iterable<string>): number {
  let d = 2;
  for (const v of values) d = Math.max(d, decimalsFor(v));
  return d;
}

/** An amount in USD at `decimals` places (default: as it shows alone). */
export function usd(exact: string, decimals = decimalsFor(exact)): string {
  const v = parse(exact);
  if (v === undefined) return `$${exact}`;
  const neg = v < 0n;
  const text = formatDecimal(rounded(neg ? -v : v, decimals));
  const [whole, frac = ''] = text.split('.');
  return `${neg && text !== '0' ? '-' : ''}$${whole}.${frac.padEnd(decimals, '0')}`;
}

/** The exact amount, for a title. */
export const exactUsd = (exact: string): string => `$${exact} (exact)`;
