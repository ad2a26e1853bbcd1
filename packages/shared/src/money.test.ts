import { describe, expect, it } from 'vitest';
import { decimalFromNumber, divRoundHalfEven, formatDecimal, mulCountEach, mulCountPerMillion, parseDecimal, SCALE, sumDecimal } from './money.js';

describe('parseDecimal / formatDecimal', () => {
  it.each([
    ['0', '0'],
    ['-0', '0'],
    ['2.5', '2.5'],
    ['0.075', '0.075'],
    ['+3', '3'],
    ['.5', '0.5'],
    ['007.500', '7.5'],
    ['-1.25', '-1.25'],
    ['1e-7', '0.0000001'],
    ['2.5E+3', '2500'],
    ['1.5e2', '150'],
    ['123456789012345678901234567890', '123456789012345678901234567890'],
    ['0.000000000000000001', '0.000000000000000001'],
  ])('%s reads as %s', (text, canonical) => {
    expect(formatDecimal(parseDecimal(text))).toBe(canonical);
  });

  it('keeps 18 fractional digits, rounding any further digits half to even', () => {
    expect(parseDecimal('1')).toBe(SCALE);
    expect(formatDecimal(parseDecimal('0.0000000000000000005'))).toBe('0');
    expect(formatDecimal(parseDecimal('0.0000000000000000015'))).toBe('0.000000000000000002');
    expect(formatDecimal(parseDecimal('0.0000000000000000025'))).toBe('0.000000000000000002');
    expect(formatDecimal(parseDecimal('0.00000000000000000251'))).toBe('0.000000000000000003');
    expect(formatDecimal(parseDecimal('-0.0000000000000000015'))).toBe('-0.000000000000000002');
  });

  it.each(['', ' 1', '1 ', '1,5', '1.2.3', 'abc', 'NaN', 'Infinity', '0x10', '-', '.', '1e', 'e5', '1e99999', '--1', '1_000'])('rejects %j', (text) => {
    expect(() => parseDecimal(text)).toThrow(/decimal/);
  });

  it('never writes exponent notation', () => {
    expect(formatDecimal(1n)).toBe('0.000000000000000001');
    expect(formatDecimal(10n ** 40n)).toBe('10000000000000000000000');
    expect(formatDecimal(-1n)).toBe('-0.000000000000000001');
  });

  it('reads catalog numbers as the literal their author wrote', () => {
    expect(formatDecimal(decimalFromNumber(0.075))).toBe('0.075');
    expect(formatDecimal(decimalFromNumber(0.1))).toBe('0.1');
    expect(formatDecimal(decimalFromNumber(1e-7))).toBe('0.0000001');
    expect(formatDecimal(decimalFromNumber(0.0375))).toBe('0.0375');
    expect(() => decimalFromNumber(Number.NaN)).toThrow(/finite/);
  });
});

describe('arithmetic', () => {
  it('prices tokens per million exactly', () => {
    // 1234 tokens at $0.15 / 1M = $0.0001851
    expect(formatDecimal(mulCountPerMillion(1234, parseDecimal('0.15')))).toBe('0.0001851');
    // 1 token at $0.075 / 1M = $0.000000075
    expect(formatDecimal(mulCountPerMillion(1, parseDecimal('0.075')))).toBe('0.000000075');
    // 9,007,199,254,740,991 tokens (the largest safe count) at $2.5 / 1M
    expect(formatDecimal(mulCountPerMillion(Number.MAX_SAFE_INTEGER, parseDecimal('2.5')))).toBe('22517998136.8524775');
    expect(mulCountPerMillion(0, parseDecimal('2.5'))).toBe(0n);
  });

  it('rounds half to even only when the price has more than 12 fractional digits', () => {
    // 1 token at 0.0000000000005 per 1M = 5e-19: half way, rounds to the even 0
    expect(mulCountPerMillion(1, parseDecimal('0.0000000000005'))).toBe(0n);
    // 3 tokens: 1.5e-18 rounds to the even 2e-18
    expect(mulCountPerMillion(3, parseDecimal('0.0000000000005'))).toBe(2n);
    expect(divRoundHalfEven(5n, 2n)).toBe(2n);
    expect(divRoundHalfEven(7n, 2n)).toBe(4n);
    expect(divRoundHalfEven(-7n, 2n)).toBe(-4n);
  });

  it('prices units each exactly', () => {
    expect(formatDecimal(mulCountEach(3, parseDecimal('0.01')))).toBe('0.03');
    expect(formatDecimal(mulCountEach(7, parseDecimal('0.039')))).toBe('0.273');
  });

  it.each([-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53])('rejects the count %s', (count) => {
    expect(() => mulCountPerMillion(count, SCALE)).toThrow(/non-negative integer/);
    expect(() => mulCountEach(count, SCALE)).toThrow(/non-negative integer/);
  });
});

describe('sumDecimal', () => {
  it('adds decimal strings exactly', () => {
    expect(sumDecimal(['0.1', '0.2'])).toBe('0.3');
    expect(sumDecimal([])).toBe('0');
    expect(sumDecimal(['1.000000000000000001', '-1'])).toBe('0.000000000000000001');
  });

  it('sums 10^6 rows with no drift, where a float sum drifts', () => {
    // Typical per-span costs: 0.1, a gpt-4o-mini call and a 1-token cached read.
    const rows = ['0.1', '0.000123456789012345', '0.000000075'];
    const n = 1_000_000;
    const values = (function* () {
      for (let i = 0; i < n; i++) yield rows[i % 3] as string;
    })();
    let float = 0;
    for (let i = 0; i < n; i++) float += Number(rows[i % 3]);

    // 333,334 × 0.1 + 333,333 × 0.000123456789012345 + 333,333 × 0.000000075
    // = 33333.4 + 41.152221851851995885 + 0.024999975
    expect(sumDecimal(values)).toBe('33374.577221826851995885');
    // Even the closest double is far nearer than the float sum, which is off
    // in the 7th decimal place.
    const closestDouble = Number('33374.577221826851995885');
    expect(Math.abs(float - closestDouble)).toBeGreaterThan(1e-7);
  });
});
