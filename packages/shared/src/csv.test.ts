import { describe, expect, it } from 'vitest';
import { csvCell, toCsv } from './csv.js';

describe('csv', () => {
  it('quotes only what needs quoting, doubling quotes', () => {
    expect(csvCell('plain')).toBe('plain');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    expect(csvCell('two\nlines')).toBe('"two\nlines"');
    expect(csvCell(null)).toBe('');
    expect(csvCell(0.5)).toBe('0.5');
  });

  it('takes the columns from the first row', () => {
    expect(
      toCsv([
        { a: 1, b: 'x' },
        { a: 2, b: 'y,z' },
      ]),
    ).toBe('a,b\n1,x\n2,"y,z"');
    expect(toCsv([])).toBe('');
  });
});
