import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from './errors.js';
import { consolePaths, consoleSchemas, consoleSecurityScheme } from './openapi-console.js';
import { ErrorBodySchema, IngestAcceptedSchema, IngestPayloadSchema } from './schema.js';

/**
 * The OpenAPI 3.1 document of the service, generated from the zod schemas so
 * the contract is written once. `docs/openapi.json` is this document; a test
 * fails when the committed copy is stale.
 */

type JsonObject = Record<string, unknown>;

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonObject {
  const s = z.toJSONSchema(schema, { target: 'draft-2020-12', unrepresentable: 'any', io }) as JsonObject;
  delete s.$schema;
  return s;
}

/** The request body schema alone (JSON Schema 2020-12), for validators. */
export function ingestPayloadJsonSchema(): JsonObject {
  return jsonSchema(IngestPayloadSchema, 'input');
}

const errorResponse = (description: string, headers?: JsonObject): JsonObject => ({
  description,
  ...(headers === undefined ? {} : { headers }),
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

/** The codes a client of the public listener can meet, from the catalog in errors.ts. */
export function publicErrorCodes(): ErrorCode[] {
  return (Object.keys(ERROR_CODES) as ErrorCode[]).filter((c) => ERROR_CODES[c].surface === 'ingest');
}

/** The Error schema, its `code` listing the codes and their statuses (`x-codes`; not an enum, so a new code breaks no client). */
function errorBodySchema(): JsonObject {
  const s = jsonSchema(ErrorBodySchema, 'output');
  const props = s.properties as Record<string, JsonObject>;
  props.code = { ...props.code, 'x-codes': Object.fromEntries(publicErrorCodes().map((c) => [c, [...ERROR_CODES[c].status]])) };
  return s;
}

const retryAfter = {
  'Retry-After': { description: 'Seconds to wait before retrying (integer >= 1).', schema: { type: 'integer', minimum: 1 } },
};

const otlpStatus = (description: string, headers?: JsonObject): JsonObject => ({
  description,
  ...(headers === undefined ? {} : { headers }),
  content: {
    'application/json': { schema: { $ref: '#/components/schemas/OtlpStatus' } },
    'application/x-protobuf': { schema: { type: 'string', format: 'binary', description: 'google.rpc.Status, protobuf-encoded (for a protobuf request).' } },
  },
});

/** POST /v1/traces: OTLP/HTTP. Its messages are defined by opentelemetry-proto, not here; the document names them. */
function otlpTracesPath(): JsonObject {
  return {
    post: {
      operationId: 'otlpExportTraces',
      summary: 'Ingest OpenTelemetry traces (OTLP/HTTP)',
      description:
        'An opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest, as protobuf or in the OTLP JSON encoding (hex ids, integer enums, ' +
        'lowerCamelCase, 64-bit integers as strings or numbers, unknown fields ignored), optionally gzip-compressed; the answer is encoded like the request. ' +
        'Same checks as /ingest, in the same order (size, key, rate limit and quota, decode, map, price, write log); GenAI semantic-convention attributes ' +
        '(and the OpenInference, Vercel AI SDK and older gen_ai aliases) are mapped onto span rows and priced. ' +
        'The 200 is sent once the batch is in the write log. ' +
        'Statuses follow OTLP retry rules: only 429 and 503 are worth retrying; a used-up quota is 403 so that exporters do not retry it.',
      requestBody: {
        required: true,
        content: {
          'application/x-protobuf': { schema: { type: 'string', format: 'binary', description: 'ExportTraceServiceRequest, protobuf-encoded.' } },
          'application/json': { schema: { $ref: '#/components/schemas/OtlpExportTraceServiceRequest' } },
        },
      },
      responses: {
        '200': {
          description: 'Accepted into the write log; spans that could not be stored are counted in partialSuccess. An empty request is a 200 too.',
          content: {
            'application/json': { schema: { $ref: '#/components/schemas/OtlpExportTraceServiceResponse' } },
            'application/x-protobuf': { schema: { type: 'string', format: 'binary', description: 'ExportTraceServiceResponse, protobuf-encoded.' } },
          },
        },
        '400': otlpStatus('Not a decodable ExportTraceServiceRequest, or a bad Content-Encoding (INVALID_ARGUMENT). Not retried.'),
        '401': otlpStatus('API key missing, invalid or revoked (UNAUTHENTICATED). Not retried.'),
        '403': otlpStatus(
          'The monthly span quota is used up (RESOURCE_EXHAUSTED, no Retry-After; final until the plan is upgraded), or the key lacks the ingest scope ' +
            '(PERMISSION_DENIED). Not retried.',
        ),
        '413': otlpStatus('Body exceeds INGEST_MAX_BODY_BYTES, on the wire or after decompression. Not retried.'),
        '415': otlpStatus('Content-Type is neither application/x-protobuf nor application/json.'),
        '429': otlpStatus(
          'Per-key rate limit, or too many failed authentications from this address (RESOURCE_EXHAUSTED); retry after Retry-After.',
          retryAfter,
        ),
        '503': otlpStatus('Draining for shutdown or the write buffer is full (UNAVAILABLE); retry after Retry-After.', retryAfter),
      },
    },
  };
}

const otlpSchemas = {
  OtlpExportTraceServiceRequest: {
    type: 'object',
    description:
      'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest in the OTLP JSON encoding (see opentelemetry-proto). Unknown fields are ignored.',
    properties: { resourceSpans: { type: 'array', items: { type: 'object' } } },
  },
  OtlpExportTraceServiceResponse: {
    type: 'object',
    properties: {
      partialSuccess: {
        type: 'object',
        properties: {
          rejectedSpans: { type: ['string', 'integer'], description: 'Spans not stored (an int64: a string in JSON).' },
          errorMessage: { type: 'string', description: 'Why, for the first few rejected spans.' },
        },
      },
    },
  },
  OtlpStatus: {
    type: 'object',
    description: 'google.rpc.Status; `error` repeats `message`, as every error body of this service carries `error`.',
    required: ['code', 'message', 'error'],
    properties: {
      code: {
        type: 'integer',
        description:
          'google.rpc.Code: 3 INVALID_ARGUMENT, 7 PERMISSION_DENIED, 8 RESOURCE_EXHAUSTED, 12 UNIMPLEMENTED, 13 INTERNAL, 14 UNAVAILABLE, 16 UNAUTHENTICATED.',
      },
      message: { type: 'string' },
      details: { type: 'array', items: { type: 'object' } },
      error: { type: 'string' },
    },
  },
};

export function buildOpenApiDocument(): JsonObject {
  return {
    openapi: '3.1.0',
    info: {
      title: 'trace-ingest',
      version: 'v1',
      description:
        'Write-path API that receives batches of LLM traces, prices each span per usage dimension and stores one row per span. ' +
        "A 202 means the batch is in the write-ahead log (fsync'd unless INGEST_DURABILITY=memory).",
    },
    servers: [{ url: 'http://localhost:4000', description: 'self-hosted default' }],
    security: [{ bearerAuth: [] }, { apiKeyHeader: [] }],
    paths: {
      '/ingest': {
        post: {
          operationId: 'ingestTraces',
          summary: 'Ingest a batch of traces',
          description:
            'Checks, in order: body size, API key, per-key rate limit and monthly quota, schema, then prices and buffers the spans. ' +
            'Usage counts are disjoint buckets, each priced at its own unit price: ' +
            'inputTokens excludes cached and cache-write tokens; outputTokens excludes reasoningTokens.',
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/IngestPayload' } } } },
          responses: {
            '202': {
              description: 'Accepted into the write buffer.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/IngestAccepted' } } },
            },
            '400': errorResponse(
              'Body is not valid JSON, or the payload fails schema validation (`issues` lists what to fix), ' +
                'or the key is sent twice or two different keys are sent.',
            ),
            '401': errorResponse('API key missing, invalid, revoked, or without the ingest scope (the message names it).'),
            '413': errorResponse('Body exceeds INGEST_MAX_BODY_BYTES (after decompression too).'),
            '429': errorResponse(
              'Rate limit (with Retry-After; retryable), too many failed authentications from this address (with Retry-After), ' +
                'or monthly span quota exceeded (no Retry-After; final until the plan is upgraded).',
              retryAfter,
            ),
            '503': errorResponse('Draining for shutdown, or the write buffer is full; retry after Retry-After or against another replica.', retryAfter),
            '500': errorResponse('Internal error: nothing was accepted; retry with backoff.'),
          },
        },
      },
      '/v1/traces': otlpTracesPath(),
      '/v1/budget': {
        get: {
          operationId: 'budget',
          summary: "This UTC month's budget and spend of the key's org and, given one, a customer",
          description:
            'Needs a key with the budget:read scope (`trace-ingest keys create --scope budget:read`); an ingest key is refused with 403. ' +
            'A key limited to named customers must give ?customer= (one of them) and is answered without the org. ' +
            'Advisory: spans are priced after the model call, and counted once flushed (asOf says when the spend was read). ' +
            'USD amounts are exact decimal strings; budgetUsd and remainingUsd are null without a budget. ' +
            "A customer is held to its own budget, else to the org's every-customer budget.",
          parameters: [{ name: 'customer', in: 'query', required: false, schema: { type: 'string', minLength: 1, maxLength: 128 } }],
          responses: {
            '200': {
              description: 'The budgets and spend',
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    required: ['month', 'asOf'],
                    properties: {
                      month: { type: 'string', pattern: '^\\d{4}-\\d{2}$' },
                      asOf: { type: 'integer', description: 'epoch ms' },
                      org: { $ref: '#/components/schemas/BudgetStatus' },
                      customer: { allOf: [{ $ref: '#/components/schemas/BudgetStatus' }, { type: 'object', properties: { id: { type: 'string' } } }] },
                    },
                  },
                },
              },
            },
            '400': errorResponse('customer is empty or longer than 128 characters, or the key is sent twice.'),
            '401': errorResponse('API key missing, invalid or revoked.'),
            '403': errorResponse('The key lacks the budget:read scope, or is limited to named customers and this is not one of them.'),
            '429': errorResponse('Rate limit, or too many failed authentications from this address (with Retry-After).', retryAfter),
          },
        },
      },
      '/healthz': { get: { operationId: 'health', summary: 'The process is up', security: [], responses: { '200': { description: 'Alive' } } } },
      '/readyz': {
        get: {
          operationId: 'ready',
          summary: 'Stores reachable, not draining, write log under its cap',
          security: [],
          responses: { '200': { description: 'Ready' }, '503': errorResponse('Not ready') },
        },
      },
      '/openapi.json': {
        get: { operationId: 'openapi', summary: 'This document', security: [], responses: { '200': { description: 'OpenAPI 3.1 document' } } },
      },
      ...consolePaths(),
    },
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API key>' },
        apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        consoleToken: consoleSecurityScheme,
      },
      schemas: {
        BudgetStatus: {
          type: 'object',
          required: ['budgetUsd', 'spentUsd', 'remainingUsd', 'crossed', 'forecast'],
          properties: {
            budgetUsd: { type: ['string', 'null'], description: 'the budget that governs it: a customer its own, else the every-customer one' },
            spentUsd: { type: 'string' },
            remainingUsd: { type: ['string', 'null'] },
            crossed: { type: 'array', items: { type: 'integer' }, description: 'alert percentages reached this month' },
            forecast: { oneOf: [{ $ref: '#/components/schemas/BudgetForecast' }, { type: 'null' }] },
          },
        },
        BudgetForecast: {
          type: 'object',
          required: ['projectedUsd', 'dailyRateUsd', 'crossesOn'],
          description:
            "The month's spend before today, plus for today and each day left the daily run rate (the 14 complete UTC days before " +
            "today, weighted linearly to recent ones; today at least what it has spent). The org's also has errorPct: the mean " +
            'absolute error of this projection on its last errorMonths months, made on the same day of the month (null: no month to measure).',
          properties: {
            projectedUsd: { type: 'string' },
            dailyRateUsd: { type: 'string' },
            crossesOn: {
              type: ['string', 'null'],
              description: 'YYYY-MM-DD (UTC) the budget is projected to be reached; null without one, once reached, or not this month',
            },
            errorPct: { type: ['string', 'null'] },
            errorMonths: { type: 'integer' },
          },
        },
        IngestPayload: ingestPayloadJsonSchema(),
        IngestAccepted: jsonSchema(IngestAcceptedSchema, 'output'),
        Error: errorBodySchema(),
        ...otlpSchemas,
        ...consoleSchemas(),
      },
    },
  };
}
