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
});
