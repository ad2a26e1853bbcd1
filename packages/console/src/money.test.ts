import { describe, expect, it } from 'vitest';
import { sharedDecimals, usd } from './money.js';

describe('usd: money for the eye', () => {
  it('shows the cent and two more decimals, two significant digits under a cent, rounding the exact decimal half up', () => {
    expect(usd('0.0441')).toBe('$0.0441');
    expect(usd('0.044149999')).toBe('$0.0441');
    expect(usd('0.04415')).toBe('$0.0442');
    expect(usd('12.345678')).toBe('$12.3457');
    expect(usd('2.5')).toBe('$2.50');
    expect(usd('1234')).toBe('$1234.00');
    expect(usd('0')).toBe('$0.00');
    expect(usd('0.0000025')).toBe('$0.0000025');
    expect(usd('0.000002549')).toBe('$0.0000025');
    expect(usd('0.009999')).toBe('$0.01');
    expect(usd('0.000000000000000001')).toBe('$0.000000000000000001');
    expect(usd('-0.0441')).toBe('-$0.0441');
  });

  it('shows figures read together at one precision, the most any needs', () => {
    const column = ['0.17', '0.169', '0.1682', '0', '12.5'];
    const d = sharedDecimals(column);
    expect(d).toBe(4);
    expect(column.map((v) => usd(v, d))).toEqual(['$0.1700', '$0.1690', '$0.1682', '$0.0000', '$12.5000']);
    // A budget and its spend, both whole cents: two decimals.
    expect(sharedDecimals(['250', '19.99'])).toBe(2);
    // A span of a few millionths beside one of dollars: the column shows both to 2 significant digits of the smallest.
    const spans = ['0.0000025', '1.234567'];
    expect(spans.map((v) => usd(v, sharedDecimals(spans)))).toEqual(['$0.0000025', '$1.2345670']);
    expect(usd('-0.00001', 2)).toBe('$0.00');
  });
});
