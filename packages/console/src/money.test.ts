import { describe, expect, it } from 'vitest';
import { usd } from './money.js';

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
});
