import { REPORT_COST_COLUMNS, USAGE_COLUMNS } from './rows.js';

/**
 * The cost console's read-only JSON API (GET /console/api/*), part of the
 * OpenAPI document. It is served on the console listener (CONSOLE_HOST,
 * CONSOLE_PORT), never on the ingest port, and needs a console token.
 * Money is always an exact decimal string in USD, as `trace-ingest usage --json` prints it.
 */

type JsonObject = Record<string, unknown>;

const money = { type: 'string', pattern: '^-?\\d+(\\.\\d+)?$', description: 'USD as an exact decimal string (never a float).' };
const int = { type: 'integer', minimum: 0 };
const day = { type: 'string', format: 'date', description: 'YYYY-MM-DD (UTC)' };
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const TOKENS = USAGE_COLUMNS;
const COSTS = REPORT_COST_COLUMNS;

const obj = (properties: JsonObject, required = Object.keys(properties)): JsonObject => ({ type: 'object', properties, required });

export function consoleSchemas(): Record<string, JsonObject> {
  return {
    ConsoleOrg: obj({ id: { type: 'string' }, name: { type: 'string' }, plan: { type: 'string' } }),
    ConsoleOrgList: obj({ orgs: { type: 'array', items: ref('ConsoleOrg') } }),
    ConsoleRange: obj({ from: day, to: { ...day, description: 'inclusive' } }),
    UsageRow: {
      ...obj(
        {
          group: { type: 'string', description: 'The grouped value (model, customer, day, trace id…); "TOTAL" in totals.' },
          subgroup: { type: 'string', description: 'The second grouping (provider, model or day), where the endpoint has one.' },
          spans: int,
          unpricedSpans: { ...int, description: 'Spans with a model but no price (catalog or override).' },
          tokens: obj(Object.fromEntries(TOKENS.map((t) => [t, int]))),
          costs: obj(Object.fromEntries(COSTS.map((c) => [c, money]))),
        },
        ['group', 'spans', 'unpricedSpans', 'tokens', 'costs'],
      ),
      description: 'One row of the usage report, exactly as `trace-ingest usage --json` prints it.',
    },
    ConsoleOverview: obj({
      org: ref('ConsoleOrg'),
      range: ref('ConsoleRange'),
      days: { type: 'array', items: day },
      models: { type: 'array', items: { type: 'string' } },
      series: {
        type: 'array',
        items: obj({ day, model: { type: 'string' }, spans: int, cost: money }),
        description: 'Cost and spans per day and model (the stacked chart).',
      },
      rows: { type: 'array', items: ref('UsageRow'), description: 'By model, as `usage --by model`.' },
      total: ref('UsageRow'),
      monthToDate: obj({
        month: { type: 'string', description: 'YYYY-MM (UTC), the current month' },
        spansCounted: { ...int, description: 'Spans counted against the quota this month.' },
        quotaSpans: { ...int, description: "The plan's monthly spans; 0 = none." },
        quotaUsed: { oneOf: [money, { type: 'null' }], description: 'Percent of the quota used, two decimals, exact.' },
        spansStored: int,
        cost: money,
      }),
      budget: {
        oneOf: [ref('BudgetStatus'), { type: 'null' }],
        description: "The org's own budget this month, as GET /v1/budget answers it; null without one.",
      },
      forecast: { oneOf: [ref('BudgetForecast'), { type: 'null' }], description: "The org's month-end forecast, as GET /v1/budget answers it." },
    }),
    ConsoleCustomers: obj({
      org: ref('ConsoleOrg'),
      range: ref('ConsoleRange'),
      days: { type: 'array', items: day },
      rows: { type: 'array', items: ref('UsageRow'), description: 'By customer, as `usage --by customer`.' },
      total: ref('UsageRow'),
      daily: { type: 'object', additionalProperties: { type: 'array', items: money }, description: 'Customer → cost per day, aligned with `days`.' },
      names: { type: 'object', additionalProperties: { type: 'string' }, description: "Customer id → the name clients sent for it ('' when none)." },
      budgets: {
        type: 'object',
        additionalProperties: ref('BudgetStatus'),
        description: 'Customer id → this month against the budget that governs it (its own, else the every-customer one), for shown customers with one.',
      },
      forecasts: {
        type: 'object',
        additionalProperties: ref('BudgetForecast'),
        description: 'Customer id → its month-end forecast, as GET /v1/budget answers it.',
      },
    }),
    ConsolePrice: obj({
      source: { type: 'string', description: '"catalog:<version>" or "override:<id>"' },
      provider: { type: 'string' },
      model: { type: 'string' },
      inputPerMtok: money,
      cachedInputPerMtok: money,
      cacheWriteInputPerMtok: money,
      outputPerMtok: money,
      reasoningPerMtok: money,
      cacheWrite1hInputPerMtok: { oneOf: [money, { type: 'null' }], description: 'null: no price (a span with these tokens is left unpriced)' },
      audioInputPerMtok: { oneOf: [money, { type: 'null' }] },
      cachedAudioInputPerMtok: { oneOf: [money, { type: 'null' }] },
      audioOutputPerMtok: { oneOf: [money, { type: 'null' }] },
      imageEach: money,
      webSearchEach: money,
      requestEach: money,
      tiers: { type: 'array', items: int },
    }),
    ConsoleModels: obj({
      org: ref('ConsoleOrg'),
      range: ref('ConsoleRange'),
      pricesAt: { type: 'string', format: 'date-time', description: 'The instant the unit prices are quoted for: the end of the range, or now.' },
      rows: {
        type: 'array',
        items: { allOf: [ref('UsageRow'), obj({ price: { oneOf: [ref('ConsolePrice'), { type: 'null' }] } })] },
        description: 'By model, then provider (subgroup).',
      },
      total: ref('UsageRow'),
      unpriced: {
        type: 'array',
        items: obj({
          model: { type: 'string' },
          provider: { type: 'string' },
          spans: int,
          fix: { type: 'string', description: 'The `trace-ingest prices set` line that prices the model (fill in the two prices).' },
          reprice: { type: 'string', description: 'The `trace-ingest reprice` line that then recomputes the stored costs.' },
        }),
      },
    }),
    ConsoleTraces: obj({
      org: ref('ConsoleOrg'),
      range: ref('ConsoleRange'),
      rows: { type: 'array', items: ref('UsageRow'), description: 'By trace, most expensive first (at most 200).' },
      count: { ...int, description: 'Traces in the range.' },
      total: ref('UsageRow'),
      labels: {
        type: 'object',
        additionalProperties: obj({ name: { type: 'string' }, customer: { type: 'string' } }),
        description: 'Trace id → its name and customer id, for the traces in `rows`.',
      },
    }),
    ConsoleTrace: obj({
      org: ref('ConsoleOrg'),
      traceId: { type: 'string' },
      traceName: { type: 'string' },
      customerId: { type: 'string' },
      start: { type: 'string', format: 'date-time' },
      durationMs: int,
      totalCost: money,
      spans: {
        type: 'array',
        description: 'In start order; costs, tokens and timing only (no prompts or outputs).',
        items: obj({
          spanId: { type: 'string' },
          parentSpanId: { type: 'string' },
          name: { type: 'string' },
          spanType: { type: 'string' },
          status: { type: 'string' },
          provider: { type: 'string' },
          model: { type: 'string' },
          serviceTier: { type: 'string', description: "The service tier it was billed in ('' when it reported none)." },
          region: { type: 'string', description: "The region it was billed in ('' when none)." },
          offsetMs: { type: 'integer', description: 'Start, relative to the earliest span of the trace.' },
          durationMs: int,
          inputTokens: int,
          cachedInputTokens: int,
          cacheWriteInputTokens: int,
          outputTokens: int,
          reasoningTokens: int,
          cacheWrite1hInputTokens: int,
          audioInputTokens: int,
          cachedAudioInputTokens: int,
          audioOutputTokens: int,
          totalTokens: int,
          cost: money,
          priced: { type: 'boolean' },
          priceSource: { type: 'string' },
        }),
      },
    }),
  };
}

const errors = (): JsonObject => ({
  '400': { description: 'A bad query parameter (the error says which).', content: { 'application/json': { schema: ref('Error') } } },
  '401': { description: 'Console token missing, invalid or revoked.', content: { 'application/json': { schema: ref('Error') } } },
  '404': { description: 'Unknown org, or an org this token may not see; unknown trace.', content: { 'application/json': { schema: ref('Error') } } },
});

const rangeParams = [
  { name: 'org', in: 'query', required: true, description: 'Org name or id.', schema: { type: 'string' } },
  { name: 'from', in: 'query', required: false, description: 'First day (UTC); default: the first day of the month of `to`.', schema: day },
  { name: 'to', in: 'query', required: false, description: 'Last day (UTC), inclusive; default: today. At most 366 days in all.', schema: day },
];

const op = (operationId: string, summary: string, schema: string, parameters: JsonObject[] = rangeParams): JsonObject => ({
  get: {
    operationId,
    summary,
    tags: ['console'],
    servers: [{ url: 'http://127.0.0.1:4001', description: 'the console listener (CONSOLE_HOST:CONSOLE_PORT)' }],
    security: [{ consoleToken: [] }],
    parameters,
    responses: { '200': { description: 'OK', content: { 'application/json': { schema: ref(schema) } } }, ...errors() },
  },
});

export function consolePaths(): Record<string, JsonObject> {
  return {
    '/console/api/orgs': op('consoleOrgs', 'Orgs this console token may see', 'ConsoleOrgList', []),
    '/console/api/overview': op('consoleOverview', 'Cost and spans per day by model, totals, month to date against quota', 'ConsoleOverview'),
    '/console/api/customers': op('consoleCustomers', 'Cost, spans and tokens per customer, with cost per day', 'ConsoleCustomers'),
    '/console/api/models': op('consoleModels', 'Cost per model and provider, unit prices in force and their source, unpriced models', 'ConsoleModels'),
    '/console/api/traces': op('consoleTraces', 'The most expensive traces of the range', 'ConsoleTraces'),
    '/console/api/traces/{traceId}': op('consoleTrace', 'The spans of one trace with the cost of each', 'ConsoleTrace', [
      { name: 'traceId', in: 'path', required: true, schema: { type: 'string' } },
      { name: 'org', in: 'query', required: true, description: 'Org name or id.', schema: { type: 'string' } },
    ]),
  };
}

export const consoleSecurityScheme = {
  type: 'http',
  scheme: 'bearer',
  description: 'Authorization: Bearer <console token> (trace-ingest console token create); console listener only.',
};
