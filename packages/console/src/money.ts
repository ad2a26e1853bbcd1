import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';

/**
 * Money for the eye: to the cent plus two more decimals ($12.3457, $0.0441),
 * or two significant digits for amounts under a cent ($0.0000025), rounded
 * half up on the exact decimal (never through a float). The exact value is
 * in each cell's title and data-value, and in every CSV.
 */
export function usd(exact: string): string {
  let v: bigint;
  try {
    v = parseDecimal(exact);
  } catch {
    return `$${exact}`;
  }
  const neg = v < 0n;
  const abs = neg ? -v : v;
  if (abs === 0n) return '$0.00';
  // 18 fractional digits in the scaled integer; keep 4 decimals from a cent up, else 2 significant digits.
  let decimals = 4;
  if (abs < 10n ** 16n) {
    const digits = abs.toString().length; // significant digits of the scaled value
    decimals = Math.min(18, 18 - digits + 2);
  }
  const unit = 10n ** BigInt(18 - decimals);
  const q = (abs + unit / 2n) / unit;
  let text = formatDecimal(q * unit);
  const [whole, frac = ''] = text.split('.');
  text = `${whole}.${frac.padEnd(2, '0')}`;
  return `${neg ? '-' : ''}$${text}`;
}

/** The exact amount, for a title. */
export const exactUsd = (exact: string): string => `$${exact} (exact)`;
