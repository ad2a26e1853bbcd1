import { ClickHouseError } from '@clickhouse/client';

/**
 * The server's numeric error code of a failed request, when it answered at
 * all. Current servers' errors arrive as the client's typed ClickHouseError;
 * with `typedErrors` false (old servers, see clickhouse-versions.ts) the code
 * is read from the wording the client does not parse.
 */
export function clickHouseErrorCode(e: unknown, typedErrors = false): number | undefined {
  if (e instanceof ClickHouseError) return /^\d+$/.test(e.code) ? Number(e.code) : undefined;
  if (typedErrors || typeof e !== 'object' || e === null) return undefined;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && /^\d+$/.test(code)) return Number(code);
  const message = (e as { message?: unknown }).message;
  // 18.16 words its errors "Code: 27, e.displayText() = ...".
  const m = typeof message === 'string' ? /^Code: (\d+)[,.]/.exec(message) : null;
  return m === null ? undefined : Number(m[1]);
}

// Codes that mean the data itself will never be accepted: parse and type errors,
// values out of range. Not here on purpose: unknown table/column (a migration
// away from working), memory and timeouts (may pass on retry).
export const REJECTED_CODES = new Set([
  6, // CANNOT_PARSE_TEXT
  25, // CANNOT_PARSE_ESCAPE_SEQUENCE
  26, // CANNOT_PARSE_QUOTED_STRING
  27, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  38, // CANNOT_PARSE_DATE
  41, // CANNOT_PARSE_DATETIME
  53, // TYPE_MISMATCH
  69, // ARGUMENT_OUT_OF_BOUND (a Decimal too big or too precise)
  70, // CANNOT_CONVERT_TYPE
  72, // CANNOT_PARSE_NUMBER
  117, // INCORRECT_DATA (but an unknown field in JSONEachRow is a column the table lacks: SCHEMA_BEHIND)
  130, // CANNOT_READ_ARRAY_FROM_TEXT
  131, // TOO_LARGE_STRING_SIZE
  321, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
  349, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
  407, // DECIMAL_OVERFLOW
  467, // CANNOT_PARSE_BOOL
]);

export const ALREADY_EXISTS_CODES = new Set([
  15, // DUPLICATE_COLUMN: ALTER ... ADD COLUMN has no IF NOT EXISTS on 18.16
  57, // TABLE_ALREADY_EXISTS: a concurrent CREATE ... IF NOT EXISTS may still lose the race
  82, // DATABASE_ALREADY_EXISTS
]);

// Codes that mean the schema is behind the rows (a migration away from working): retryable.
export const SCHEMA_BEHIND_CODES = new Set([
  16, // NO_SUCH_COLUMN_IN_TABLE
  60, // UNKNOWN_TABLE
  81, // UNKNOWN_DATABASE
]);

/** INCORRECT_DATA: with JSONEachRow, also an unknown field (a column the table lacks). */
export const INCORRECT_DATA = 117;

/** DATABASE_ALREADY_EXISTS */
export const DATABASE_EXISTS = 82;
/** READONLY: a write, SET or table function refused under readonly=1. */
export const READONLY = 164;
/** SYNTAX_ERROR: what is not a query, given as a subquery. */
export const SYNTAX_ERROR = 62;

/** ILLEGAL_COLUMN: also how 18.16 says an ADD COLUMN lost a race ("column with this name already exists"). */
export const ILLEGAL_COLUMN = 44;
