import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { costEach, costPerMillion, divRoundHalfEven, formatDecimal, parseDecimal, sumDecimals } from './decimal.js';

describe('decimal money', () => {
  it.each([
    ['0', '0'],
    ['2.5', '2.5'],
    ['0.075', '0.075'],
    ['1e-7', '0.0000001'],
    ['1.25E+2', '125'],
    ['-3.10', '-3.1'],
    ['.5', '0.5'],
    ['000123.4500', '123.45'],
    ['0.000000000000000001', '0.000000000000000001'],
  ])('parses %s exactly', (input, text) => {
    expect(formatDecimal(parseDecimal(input))).toBe(text);
  });

  it('takes numbers by their shortest round-trip text, not their binary value', () => {
    expect(formatDecimal(parseDecimal(0.1))).toBe('0.1');
    expect(formatDecimal(parseDecimal(0.135))).toBe('0.135');
  });

  it.each(['', 'abc', '1.2.3', '--1', '1e', 'NaN', '0x10'])('refuses %j', (bad) => {
    expect(() => parseDecimal(bad)).toThrow(/not a decimal|exponent/);
  });

  it('rounds half to even beyond 18 digits', () => {
    expect(formatDecimal(parseDecimal('0.0000000000000000005'))).toBe('0');
    expect(formatDecimal(parseDecimal('0.0000000000000000015'))).toBe('0.000000000000000002');
    expect(divRoundHalfEven(-5n, 2n)).toBe(-2n);
  });

  it('prices per million and per unit exactly', () => {
    // 1234 tokens at $2.50 / 1M = $0.003085
    expect(formatDecimal(costPerMillion(1234, parseDecimal('2.5')))).toBe('0.003085');
    // 7 tokens at $0.075 / 1M
    expect(formatDecimal(costPerMillion(7, parseDecimal('0.075')))).toBe('0.000000525');
    expect(formatDecimal(costEach(3, parseDecimal('0.01')))).toBe('0.03');
  });

  it('sums a million costs with no drift, where floats drift', () => {
    const one = formatDecimal(costPerMillion(1, parseDecimal('0.1')));
    expect(one).toBe('0.0000001');
    let float = 0;
    const values: string[] = [];
    for (let i = 0; i < 1_000_000; i++) {
      values.push(one);
      float += 0.0000001;
    }
    expect(sumDecimals(values)).toBe('0.1');
    expect(float).not.toBe(0.1);
  });

  it('formats any amount as the division by 10^18 writes it', () => {
    // The plain form: integer part and remainder by BigInt division, the remainder's trailing zeros cut.
    const reference = (v: bigint): string => {
      if (v === 0n) return '0';
      const abs = v < 0n ? -v : v;
      const sign = v < 0n ? '-' : '';
      const rest = abs % 10n ** 18n;
      const int = (abs / 10n ** 18n).toString();
      return rest === 0n ? sign + int : `${sign}${int}.${rest.toString().padStart(18, '0').replace(/0+$/, '')}`;
    };
    const amounts = fc.oneof(
      fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }),
      fc.bigInt({ min: -(10n ** 19n), max: 10n ** 19n }),
      fc.tuple(fc.bigInt({ min: -999n, max: 999n }), fc.nat({ max: 40 })).map(([m, e]) => m * 10n ** BigInt(e)),
    );
    fc.assert(
      fc.property(amounts, (v) => formatDecimal(v) === reference(v)),
      { numRuns: 5000, seed: 20261126 },
    );
    for (const v of [1n, -1n, 10n ** 17n, 10n ** 18n, -(10n ** 18n), 10n ** 18n + 1n, 999999999999999999n, 10n ** 36n])
      expect(formatDecimal(v)).toBe(reference(v));
  });

  it('divides half to even whether or not the division is exact', () => {
    // The plain form: the quotient rounded by comparing twice the remainder with the divisor.
    const reference = (a: bigint, b: bigint): bigint => {
      const n = a < 0n ? -a : a;
      const q = n / b;
      const twice = (n % b) * 2n;
      const up = twice > b || (twice === b && q % 2n === 1n);
      return (a < 0n ? -1n : 1n) * (up ? q + 1n : q);
    };
    const divisors = fc.oneof(fc.constantFrom(1n, 2n, 1_000_000n, 1000n), fc.bigInt({ min: 1n, max: 10n ** 20n }));
    const exact = fc.tuple(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), divisors).map(([q, b]) => [q * b, b] as const);
    const any = fc.tuple(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), divisors);
    fc.assert(
      fc.property(fc.oneof(exact, any), ([a, b]) => divRoundHalfEven(a, b) === reference(a, b)),
      { numRuns: 5000, seed: 20261126 },
    );
  });
});
