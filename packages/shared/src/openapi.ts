import { z } from 'zod';
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

const retryAfter = {
  'Retry-After': { description: 'Seconds to wait before retrying (integer >= 1).', schema: { type: 'integer', minimum: 1 } },
};

export function buildOpenApiDocument(): JsonObject {
  return {
    openapi: '3.1.0',
    info: {
      title: 'trace-ingest',
      version: 'v1',
      description:
        'Write-path API that receives batches of LLM traces, prices each span per usage dimension and stores one row per span. ' +
        'A 202 means the batch is in the write-ahead log (fsync\'d unless INGEST_DURABILITY=memory).',
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
            'Usage counts are disjoint buckets, each priced at its own unit price: inputTokens excludes cached and cache-write tokens; outputTokens excludes reasoningTokens.',
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/IngestPayload' } } } },
          responses: {
            '202': { description: 'Accepted into the write buffer.', content: { 'application/json': { schema: { $ref: '#/components/schemas/IngestAccepted' } } } },
            '400': errorResponse('Body is not valid JSON, or the payload fails schema validation (`issues` lists what to fix).'),
            '401': errorResponse('API key missing, invalid or revoked.'),
            '413': errorResponse('Body exceeds INGEST_MAX_BODY_BYTES (after decompression too).'),
            '429': errorResponse('Rate limit (with Retry-After; retryable) or monthly span quota exceeded (no Retry-After; final until the plan is upgraded).', retryAfter),
            '503': errorResponse('Draining for shutdown, or the write buffer is full; retry after Retry-After or against another replica.', retryAfter),
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
      '/metrics': { get: { operationId: 'metrics', summary: 'Prometheus metrics', security: [], responses: { '200': { description: 'Prometheus text format', content: { 'text/plain': {} } } } } },
      '/openapi.json': { get: { operationId: 'openapi', summary: 'This document', security: [], responses: { '200': { description: 'OpenAPI 3.1 document' } } } },
      ...consolePaths(),
    },
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API key>' },
        apiKeyHeader: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        consoleToken: consoleSecurityScheme,
      },
      schemas: {
        IngestPayload: ingestPayloadJsonSchema(),
        IngestAccepted: jsonSchema(IngestAcceptedSchema, 'output'),
        Error: jsonSchema(ErrorBodySchema, 'output'),
        ...consoleSchemas(),
      },
    },
  };
}
