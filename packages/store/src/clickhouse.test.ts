import { describe, expect, it } from 'vitest';
import { COST_COLUMNS, encodeLine, encodeRow, spanToRow, UNPRICED } from '@trace-ingest/shared/rows';
import type { Span } from '@trace-ingest/shared/schema';
import { ClickHouseError } from '@clickhouse/client';
import { clickHouseErrorCode } from './clickhouse-errors.js';
import { unquoteCosts } from './clickhouse-lines.js';
import { loadClickHouseMigrations } from './clickhouse-migrations.js';
import { splitStatements } from './migration-files.js';
import { bindParams, quoteIdentifier, quoteString, sqlLiteral } from './clickhouse-sql.js';
import { ddlSettingsFor, needsUnquotedCosts, serverRules, VERSION_RULES } from './clickhouse-versions.js';

describe('quoteString', () => {
  it('escapes quotes, backslashes and control characters and keeps unicode', () => {
    expect(quoteString("it's")).toBe("'it\\'s'");
    expect(quoteString('a\\b')).toBe("'a\\\\b'");
    expect(quoteString("\\'")).toBe("'\\\\\\''");
    expect(quoteString('l1\nl2\r\t\0')).toBe("'l1\\nl2\\r\\t\\0'");
    expect(quoteString('\u0001\u007f')).toBe("'\\x01\\x7f'");
    expect(quoteString('Ünïcode 😀 \u2028')).toBe("'Ünïcode 😀 \u2028'");
    expect(quoteString('')).toBe("''");
  });

  it('never lets a value end the literal early', () => {
    for (const hostile of ["'; DROP TABLE spans; --", "\\'; SELECT 1; --", "\\\\'", "'\n--", "a'b\\'c\\\\'d"]) {
      const lit = quoteString(hostile);
      // Inside the literal every quote is preceded by an odd run of backslashes.
      const body = lit.slice(1, -1);
      for (let i = 0; i < body.length; i++) {
        if (body[i] !== "'") continue;
        let run = 0;
        for (let j = i - 1; j >= 0 && body[j] === '\\'; j--) run++;
        expect(run % 2).toBe(1);
      }
      expect(body.endsWith('\\') && !body.endsWith('\\\\')).toBe(false);
    }
  });
});

describe('sqlLiteral', () => {
  it('writes numbers, bigints, booleans, null, arrays and dates', () => {
    expect(sqlLiteral(42)).toBe('42');
    expect(sqlLiteral(1.25)).toBe('1.25');
    expect(sqlLiteral(-5)).toBe('(-5)');
    expect(sqlLiteral(-0)).toBe('(0)');
    expect(sqlLiteral(12345678901234567890n)).toBe('12345678901234567890');
    expect(sqlLiteral(-1n)).toBe('(-1)');
    expect(sqlLiteral(true)).toBe('1');
    expect(sqlLiteral(false)).toBe('0');
    expect(sqlLiteral(null)).toBe('NULL');
    expect(sqlLiteral(['a', "b'", 3])).toBe("['a', 'b\\'', 3]");
    expect(sqlLiteral([])).toBe('[]');
    expect(sqlLiteral([[1], [2, -3]])).toBe('[[1], [2, (-3)]]');
    expect(sqlLiteral(new Date(Date.UTC(2026, 0, 2)))).toBe(String(Date.UTC(2026, 0, 2)));
  });

  it('refuses what has no safe literal', () => {
    expect(() => sqlLiteral(Number.NaN)).toThrow(TypeError);
    expect(() => sqlLiteral(Number.POSITIVE_INFINITY)).toThrow(TypeError);
    expect(() => sqlLiteral(undefined)).toThrow(/undefined/);
    expect(() => sqlLiteral({ a: 1 })).toThrow(/object/);
    expect(() => sqlLiteral(new Date(Number.NaN))).toThrow(/Date/);
    expect(() => sqlLiteral(Symbol('x'))).toThrow(TypeError);
  });
});

describe('bindParams', () => {
  it('binds placeholders in order', () => {
    expect(bindParams('SELECT * FROM spans WHERE org_id = ? AND start_time >= ? AND model_id IN ?', ['o', 5, ['a', 'b']])).toBe(
      "SELECT * FROM spans WHERE org_id = 'o' AND start_time >= 5 AND model_id IN ['a', 'b']",
    );
    expect(bindParams('SELECT 1')).toBe('SELECT 1');
  });

  it('leaves ? inside strings, quoted identifiers and comments alone', () => {
    expect(bindParams("SELECT '?' AS q, ?", [1])).toBe("SELECT '?' AS q, 1");
    expect(bindParams("SELECT 'it\\'s ?', ?", ['x'])).toBe("SELECT 'it\\'s ?', 'x'");
    expect(bindParams("SELECT 'a''?', ?", [2])).toBe("SELECT 'a''?', 2");
    expect(bindParams('SELECT `a?b`, "c?", ?', [3])).toBe('SELECT `a?b`, "c?", 3');
    expect(bindParams('SELECT ? -- why?\n, ?', [1, 2])).toBe('SELECT 1 -- why?\n, 2');
    expect(bindParams('SELECT /* ? */ ?', [1])).toBe('SELECT /* ? */ 1');
  });

  it('keeps a bound negative number from starting a comment', () => {
    expect(bindParams('SELECT 1-?', [-1])).toBe('SELECT 1-(-1)');
  });

  it('does not let a bound value open quoted text for the next placeholder', () => {
    expect(bindParams('SELECT ?, ?', ["'", '?'])).toBe("SELECT '\\'', '?'");
    expect(bindParams('SELECT ?, ?', ['\\', 'x'])).toBe("SELECT '\\\\', 'x'");
  });

  it('requires exactly as many params as placeholders', () => {
    expect(() => bindParams('SELECT ?', [])).toThrow(/more \? placeholders/);
    expect(() => bindParams('SELECT ?', [1, 2])).toThrow(/1 \? placeholder\(s\) but 2/);
    expect(() => bindParams("SELECT '?", [])).toThrow(/unterminated/);
    expect(() => bindParams('SELECT /* ?', [])).toThrow(/unterminated/);
  });
});

describe('quoteIdentifier', () => {
  it('accepts plain names only', () => {
    expect(quoteIdentifier('trace_ingest')).toBe('`trace_ingest`');
    expect(() => quoteIdentifier('a`b')).toThrow();
    expect(() => quoteIdentifier('a b')).toThrow();
    expect(() => quoteIdentifier('')).toThrow();
  });
});

describe('unquoteCosts', () => {
  const span: Span = { spanId: 's', spanType: 'llm', name: 'n', startTime: 1, endTime: 2 };
  const costs = { ...UNPRICED, input_cost: '0.000000000000000001', total_cost: '-12345678901234567890.5', priced: true };

  it('drops exactly the quotes around cost values', () => {
    const row = spanToRow({ traceId: 't', spans: [span] }, span, { orgId: 'o', keyPrefix: 'k', receivedAt: 3 }, costs);
    const line = encodeRow(row);
    const out = unquoteCosts(Buffer.from(line + '\n' + line + '\n')).toString('utf8');
    const [a, b, rest] = out.split('\n');
    expect(rest).toBe('');
    expect(a).toBe(b);
    expect(a).toContain('"input_cost":0.000000000000000001,');
    expect(a).toContain('"total_cost":-12345678901234567890.5,');
    expect(a).toContain('"image_cost":0,');
    expect(a).not.toMatch(/_cost":"/);
    // Two quotes less per cost column.
    expect(a?.length).toBe(line.length - 2 * COST_COLUMNS.length);
    const parsed = JSON.parse(a ?? '') as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(Object.keys(row));
  });

  it('leaves look-alikes inside string values untouched', () => {
    const hostile = '"input_cost":"1" \\"total_cost\\":\\"2\\" x_cost":"3"';
    const row = spanToRow(
      { traceId: 't', traceName: hostile, spans: [span] },
      { ...span, input: hostile },
      { orgId: 'o', keyPrefix: 'k', receivedAt: 3 },
      UNPRICED,
    );
    const line = encodeRow(row);
    const out = unquoteCosts(line);
    const parsed = JSON.parse(out) as Record<string, unknown>;
    expect(parsed.trace_name).toBe(hostile);
    expect(parsed.input).toBe(hostile);
    expect(parsed.input_cost).toBe(0);
  });

  it('unquotes only the costs in table order, line by line', () => {
    const lines = ['{"a":"1"}', '{"input_cost":"1","output_cost":"2.5","x":"3"}', '{"output_cost":"9","input_cost":"-1"}', '{"input_cost":"1e5"}', ''].join(
      '\n',
    );
    expect(unquoteCosts(lines)).toBe(
      ['{"a":"1"}', '{"input_cost":1,"output_cost":2.5,"x":"3"}', '{"output_cost":9,"input_cost":"-1"}', '{"input_cost":"1e5"}', ''].join('\n'),
    );
  });

  it('unquotes the costs a line carries when it leaves the zero ones out', () => {
    const lines = ['{"a":"1","output_cost":"2","image_cost":"0.5","total_cost":"3","priced":true}', '{"b":""}', '{"total_cost":"4"}', ''].join('\n');
    expect(unquoteCosts(lines)).toBe(
      ['{"a":"1","output_cost":2,"image_cost":0.5,"total_cost":3,"priced":true}', '{"b":""}', '{"total_cost":4}', ''].join('\n'),
    );
  });

  it("unquotes the write log's lines as it does the full ones", () => {
    const row = spanToRow({ traceId: 't', spans: [span] }, span, { orgId: 'o', keyPrefix: 'k', receivedAt: 3 }, costs);
    const full = JSON.parse(unquoteCosts(encodeRow(row))) as Record<string, unknown>;
    const compact = JSON.parse(unquoteCosts(encodeLine(row))) as Record<string, unknown>;
    expect(compact.input_cost).toBe(full.input_cost);
    expect(compact.total_cost).toBe(full.total_cost);
    expect(compact).not.toHaveProperty('image_cost');
    expect(JSON.stringify(compact)).not.toMatch(/_cost":"/);
  });

  it('returns the same buffer when there is nothing to change', () => {
    const b = Buffer.from('{"a":"1"}\n');
    expect(unquoteCosts(b)).toBe(b);
  });
});

describe('migrations', () => {
  it('splits statements and drops comment lines', () => {
    expect(splitStatements('-- a; b\nCREATE TABLE a (x String); \nCREATE TABLE b (y String)\n;\n-- end;\n')).toEqual([
      'CREATE TABLE a (x String)',
      'CREATE TABLE b (y String)',
    ]);
  });

  it('loads the numbered files of migrations/clickhouse in order', async () => {
    const ms = await loadClickHouseMigrations();
    expect(ms[0]?.version).toBe('0001_spans');
    expect(ms.map((m) => m.version)).toEqual([...ms.map((m) => m.version)].sort());
    for (const m of ms) {
      expect(m.checksum).toMatch(/^[0-9a-f]{64}$/);
      // Each statement may run again (a second start, replicas at once): IF NOT EXISTS, an ADD COLUMN whose
      // "duplicate column" the runner takes as done (18.16 has no IF NOT EXISTS there), a fill guarded to run once,
      // or the record of the stored days as changed (again, it only has their top lists built once more), or a
      // rollup's view dropped to be made again with new measures (IF EXISTS, then the view's IF NOT EXISTS), a rollup
      // table dropped for the view of its derived rows (IF EXISTS, then IF NOT EXISTS), or the stored days' change
      // counters (counted again, a day is only derived once more).
      for (const s of m.statements)
        expect(s).toMatch(
          new RegExp(
            [
              /IF NOT EXISTS|^ALTER TABLE \w+ ADD COLUMN /.source,
              /^INSERT INTO \w+\n[^]*\(SELECT count\(\) FROM \w+\) = 0|^INSERT INTO (top_list_changes|span_changes) SELECT /.source,
              /^DROP TABLE IF EXISTS \w+$/.source,
            ].join('|'),
          ),
        );
    }
  });

  it('sends the LowCardinality setting and unquotes costs only for old servers', () => {
    expect(ddlSettingsFor('18.16.1')).toEqual({ allow_experimental_low_cardinality_type: 1 });
    expect(ddlSettingsFor('26.7.2.1')).toEqual({});
    expect(needsUnquotedCosts('18.16.1')).toBe(true);
    expect(needsUnquotedCosts('24.8.1')).toBe(false);
  });

  it('applies each rule below the version that dropped it, and none to an unreadable version', () => {
    expect(serverRules('18.16.1')).toEqual({ ddlSettings: { allow_experimental_low_cardinality_type: 1 }, unquoteCosts: true, typedErrors: false, ttl: false });
    expect(serverRules('20.3.1')).toEqual({ ddlSettings: {}, unquoteCosts: false, typedErrors: false, ttl: true });
    expect(serverRules('21.1.2')).toEqual({ ddlSettings: {}, unquoteCosts: false, typedErrors: true, ttl: true });
    expect(serverRules('')).toEqual({ ddlSettings: {}, unquoteCosts: false, typedErrors: true, ttl: true });
    for (const rule of Object.values(VERSION_RULES)) expect(rule.before).toBeGreaterThan(18);
  });
});

describe('clickHouseErrorCode', () => {
  it('reads the code from current and 18.x error forms', () => {
    expect(clickHouseErrorCode(Object.assign(new Error('x'), { code: '27' }))).toBe(27);
    expect(clickHouseErrorCode(new Error('Code: 117, e.displayText() = DB::Exception: Unknown field'))).toBe(117);
    expect(clickHouseErrorCode(new Error('Code: 53. DB::Exception: Type mismatch'))).toBe(53);
    expect(clickHouseErrorCode(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBeUndefined();
    expect(clickHouseErrorCode('nope')).toBeUndefined();
  });

  it("takes the code of the client's typed error, and only that from a server that sends typed errors", () => {
    const typed = new ClickHouseError({ message: 'Cannot parse input', code: '27', type: 'CANNOT_PARSE_INPUT_ASSERTION_FAILED' });
    expect(clickHouseErrorCode(typed, true)).toBe(27);
    expect(clickHouseErrorCode(typed)).toBe(27);
    // A wording only old servers use is not read as a code from a current one.
    expect(clickHouseErrorCode(new Error('Code: 53. DB::Exception: Type mismatch'), true)).toBeUndefined();
  });
});
