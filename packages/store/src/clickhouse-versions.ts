/**
 * What differs between ClickHouse server generations, in one table: each
 * rule names the first major version that no longer needs it. The Debian
 * server the tests start is 18.16; current servers need none of them.
 */
export const VERSION_RULES = {
  /** LowCardinality is experimental and gated by a setting, which current servers refuse as unknown. */
  lowCardinalitySetting: { before: 20 },
  /** A Decimal is read only from a bare JSON number, while the canonical line carries costs as strings. */
  unquotedDecimals: { before: 20 },
  /** Errors are worded "Code: 27, e.displayText() = ..." without the error name the client parses into a ClickHouseError. */
  untypedErrors: { before: 21 },
  /** No TTL expressions (added in 19.6): retention runs as mutations only. */
  noTtl: { before: 20 },
} as const satisfies Record<string, { before: number }>;

export interface ServerRules {
  /** Settings the migrations need. */
  ddlSettings: Record<string, 0 | 1>;
  /** Cost strings unquoted before a JSONEachRow insert. */
  unquoteCosts: boolean;
  /** Server errors arrive as the client's ClickHouseError with a code. */
  typedErrors: boolean;
  /** The server applies TTL expressions. */
  ttl: boolean;
}

function majorVersion(version: string): number {
  const major = Number.parseInt(version, 10);
  return Number.isFinite(major) ? major : Number.POSITIVE_INFINITY;
}

/** The rules for a server that reports this `version()`; an unreadable version counts as current. */
export function serverRules(version: string): ServerRules {
  const major = majorVersion(version);
  const applies = (rule: keyof typeof VERSION_RULES): boolean => major < VERSION_RULES[rule].before;
  return {
    ddlSettings: applies('lowCardinalitySetting') ? { allow_experimental_low_cardinality_type: 1 } : {},
    unquoteCosts: applies('unquotedDecimals'),
    typedErrors: !applies('untypedErrors'),
    ttl: !applies('noTtl'),
  };
}

/** Settings the migrations need on a server of this version. */
export function ddlSettingsFor(serverVersion: string): Record<string, 0 | 1> {
  return serverRules(serverVersion).ddlSettings;
}

/** Whether a server of this version needs cost strings unquoted before JSONEachRow insert. */
export function needsUnquotedCosts(serverVersion: string): boolean {
  return serverRules(serverVersion).unquoteCosts;
}
