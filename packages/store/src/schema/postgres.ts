import { bigint, index, integer, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';

/**
 * The PostgreSQL twin of schema/sqlite.ts: same tables, columns, indexes and
 * constraints, so the two key stores behave alike and data moves between them
 * as is. SQLite integers are 64-bit, hence bigint here (mode 'number': every
 * value is an epoch-ms instant or a count within Number.MAX_SAFE_INTEGER).
 * Money stays decimal text rather than numeric so both dialects hand the
 * pricing code the very same strings.
 */

const int64 = (name: string) => bigint(name, { mode: 'number' });

export const plans = pgTable('plans', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  monthlySpans: int64('monthly_spans').notNull(),
  rateLimitRps: int64('rate_limit_rps').notNull(),
  createdAt: int64('created_at').notNull(),
});

export const orgs = pgTable('orgs', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  planId: text('plan_id')
    .notNull()
    .references(() => plans.id),
  createdAt: int64('created_at').notNull(),
  /** Days a span row is kept (NULL: the install's default); the daily rollups outlive it. */
  retentionDays: integer('retention_days'),
  /** Days a span keeps its texts (input, output, tool catalog, sources, safety metadata) before they are emptied. */
  textDays: integer('text_days'),
  /** The content policy applied at ingest (record mode and redaction rules), as JSON; NULL: record everything as sent. */
  contentPolicy: text('content_policy'),
});

export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id')
      .notNull()
      .references(() => orgs.id),
    name: text('name').notNull().default(''),
    prefix: text('prefix').notNull(),
    keyHash: text('key_hash').notNull().unique(),
    createdAt: int64('created_at').notNull(),
    revokedAt: int64('revoked_at'),
    /** What the key may do: 'ingest' (write spans), 'budget:read' (GET /v1/budget), comma-separated. Keys made before scopes ingest. */
    scopes: text('scopes').notNull().default('ingest'),
    /** JSON array of the customer ids a budget:read key may read; NULL: every customer of its org. */
    customers: text('customers'),
  },
  (t) => [index('api_keys_org_idx').on(t.orgId), index('api_keys_prefix_idx').on(t.prefix)],
);

export const usageMonths = pgTable(
  'usage_months',
  {
    orgId: text('org_id')
      .notNull()
      .references(() => orgs.id),
    month: text('month').notNull(),
    spans: int64('spans').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.month] })],
);

/**
 * Batches already added to usage_months, by fingerprint, for a while after
 * (see addMonthUsageOnce): a batch sent again (a client's retry, to this or
 * another replica) is not counted twice. `addId` marks the rows of one add.
 */
export const usageBatches = pgTable(
  'usage_batches',
  {
    orgId: text('org_id').notNull(),
    batchId: text('batch_id').notNull(),
    spans: int64('spans').notNull(),
    addId: text('add_id').notNull(),
    createdAt: int64('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.batchId] }), index('usage_batches_add_idx').on(t.addId), index('usage_batches_created_idx').on(t.createdAt)],
);

export const priceOverrides = pgTable(
  'price_overrides',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().default(''),
    provider: text('provider').notNull().default(''),
    model: text('model').notNull(),
    validFrom: int64('valid_from').notNull().default(0),
    inputPerMtok: text('input_per_mtok').notNull(),
    outputPerMtok: text('output_per_mtok').notNull(),
    cachedInputPerMtok: text('cached_input_per_mtok'),
    cacheWriteInputPerMtok: text('cache_write_input_per_mtok'),
    reasoningPerMtok: text('reasoning_per_mtok'),
    imageEach: text('image_each'),
    webSearchEach: text('web_search_each'),
    requestEach: text('request_each'),
    createdAt: int64('created_at').notNull(),
  },
  (t) => [uniqueIndex('price_overrides_key_idx').on(t.orgId, t.provider, t.model, t.validFrom)],
);

export const settings = pgTable('settings', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
});

export const consoleTokens = pgTable(
  'console_tokens',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull().default(''),
    prefix: text('prefix').notNull(),
    tokenHash: text('token_hash').notNull().unique(),
    orgId: text('org_id').references(() => orgs.id),
    createdAt: int64('created_at').notNull(),
    revokedAt: int64('revoked_at'),
  },
  (t) => [index('console_tokens_prefix_idx').on(t.prefix)],
);

export const budgets = pgTable(
  'budgets',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id')
      .notNull()
      .references(() => orgs.id),
    customerId: text('customer_id').notNull().default(''),
    monthlyUsd: text('monthly_usd').notNull(),
    alertAt: text('alert_at').notNull(),
    webhookUrl: text('webhook_url'),
    /** The signing secret, sealed with the operator's key (`enc:v1:...`); never stored in the clear. */
    webhookSecret: text('webhook_secret'),
    /** The secret before the last rotation, sealed too, still signing alongside the new one until `webhook_secret_previous_until`. */
    webhookSecretPrevious: text('webhook_secret_previous'),
    webhookSecretPreviousUntil: int64('webhook_secret_previous_until'),
    createdAt: int64('created_at').notNull(),
  },
  (t) => [uniqueIndex('budgets_scope_idx').on(t.orgId, t.customerId)],
);

/** As in the SQLite schema: one alert per key, delivered through a lease. */
export const budgetEvents = pgTable(
  'budget_events',
  {
    id: text('id').primaryKey(),
    budgetId: text('budget_id').notNull(),
    orgId: text('org_id').notNull(),
    customerId: text('customer_id').notNull(),
    kind: text('kind').notNull().default('threshold'),
    modelId: text('model_id').notNull().default(''),
    month: text('month').notNull(),
    day: text('day').notNull().default(''),
    threshold: integer('threshold').notNull(),
    spentUsd: text('spent_usd').notNull(),
    budgetUsd: text('budget_usd').notNull(),
    createdAt: int64('created_at').notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: int64('next_attempt_at').notNull(),
    claimedBy: text('claimed_by'),
    claimedUntil: int64('claimed_until'),
    deliveredAt: int64('delivered_at'),
    lastError: text('last_error'),
    delivery: text('delivery').notNull().default('pending'),
    detail: text('detail').notNull().default('{}'),
  },
  (t) => [
    uniqueIndex('budget_events_key_idx').on(t.budgetId, t.kind, t.customerId, t.modelId, t.month, t.day, t.threshold),
    index('budget_events_due_idx').on(t.delivery, t.nextAttemptAt),
  ],
);

/**
 * What was done to stored data and by whom (erasures, retention changes):
 * never the data itself. An erased customer, trace or session is recorded by
 * the SHA-256 of its id, so the log does not keep what was erased.
 */
export const auditLog = pgTable(
  'audit_log',
  {
    id: text('id').primaryKey(),
    at: int64('at').notNull(),
    actor: text('actor').notNull(),
    action: text('action').notNull(),
    orgId: text('org_id').notNull(),
    target: text('target').notNull().default(''),
    detail: text('detail').notNull().default('{}'),
  },
  (t) => [index('audit_log_at_idx').on(t.at)],
);

/**
 * Price catalogs imported with `prices import` (genai-prices data files),
 * every version kept: spans name the one that priced them. The one in force
 * is `settings.price_catalog` (none: the catalog the release ships).
 */
export const priceCatalogs = pgTable('price_catalogs', {
  id: text('id').primaryKey(),
  source: text('source').notNull(),
  date: text('date').notNull(),
  sha256: text('sha256').notNull().unique(),
  data: text('data').notNull(),
  importedAt: int64('imported_at').notNull(),
  importedBy: text('imported_by').notNull().default(''),
});

/** Prices adopted from the second catalog (`prices audit --adopt`), one per (provider, model). */
export const priceAdoptions = pgTable(
  'price_adoptions',
  {
    id: text('id').primaryKey(),
    provider: text('provider').notNull(),
    model: text('model').notNull(),
    validFrom: text('valid_from').notNull(),
    source: text('source').notNull(),
    prices: text('prices').notNull(),
    createdAt: int64('created_at').notNull(),
  },
  (t) => [uniqueIndex('price_adoptions_key_idx').on(t.provider, t.model)],
);
