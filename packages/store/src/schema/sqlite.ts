import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';

/** Orgs, plans, keys, usage and price overrides in the embedded SQLite key store. */

export const plans = sqliteTable('plans', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  monthlySpans: integer('monthly_spans').notNull(),
  rateLimitRps: integer('rate_limit_rps').notNull(),
  createdAt: integer('created_at').notNull(),
});

export const orgs = sqliteTable('orgs', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  planId: text('plan_id')
    .notNull()
    .references(() => plans.id),
  createdAt: integer('created_at').notNull(),
  /** Days a span row is kept (NULL: the install's default); the daily rollups outlive it. */
  retentionDays: integer('retention_days'),
  /** Days a span keeps its texts (input, output, tool catalog, sources, safety metadata) before they are emptied. */
  textDays: integer('text_days'),
  /** The content policy applied at ingest (record mode and redaction rules), as JSON; NULL: record everything as sent. */
  contentPolicy: text('content_policy'),
});

export const apiKeys = sqliteTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id')
      .notNull()
      .references(() => orgs.id),
    name: text('name').notNull().default(''),
    prefix: text('prefix').notNull(),
    keyHash: text('key_hash').notNull().unique(),
    createdAt: integer('created_at').notNull(),
    revokedAt: integer('revoked_at'),
    /** What the key may do: 'ingest' (write spans), 'budget:read' (GET /v1/budget), comma-separated. Keys made before scopes ingest. */
    scopes: text('scopes').notNull().default('ingest'),
    /** JSON array of the customer ids a budget:read key may read; NULL: every customer of its org. */
    customers: text('customers'),
  },
  (t) => [index('api_keys_org_idx').on(t.orgId), index('api_keys_prefix_idx').on(t.prefix)],
);

export const usageMonths = sqliteTable(
  'usage_months',
  {
    orgId: text('org_id')
      .notNull()
      .references(() => orgs.id),
    month: text('month').notNull(),
    spans: integer('spans').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.month] })],
);

/**
 * Batches already added to usage_months, by fingerprint, for a while after
 * (see addMonthUsageOnce): a batch sent again (a client's retry, to this or
 * another replica) is not counted twice. `addId` marks the rows of one add.
 */
export const usageBatches = sqliteTable(
  'usage_batches',
  {
    orgId: text('org_id').notNull(),
    batchId: text('batch_id').notNull(),
    spans: integer('spans').notNull(),
    addId: text('add_id').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.batchId] }), index('usage_batches_add_idx').on(t.addId), index('usage_batches_created_idx').on(t.createdAt)],
);

/** Money is kept as decimal text: SQLite has no exact decimal type. */
export const priceOverrides = sqliteTable(
  'price_overrides',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().default(''),
    provider: text('provider').notNull().default(''),
    model: text('model').notNull(),
    validFrom: integer('valid_from').notNull().default(0),
    inputPerMtok: text('input_per_mtok').notNull(),
    outputPerMtok: text('output_per_mtok').notNull(),
    cachedInputPerMtok: text('cached_input_per_mtok'),
    cacheWriteInputPerMtok: text('cache_write_input_per_mtok'),
    reasoningPerMtok: text('reasoning_per_mtok'),
    imageEach: text('image_each'),
    webSearchEach: text('web_search_each'),
    requestEach: text('request_each'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [uniqueIndex('price_overrides_key_idx').on(t.orgId, t.provider, t.model, t.validFrom)],
);

/** Small key/value facts, e.g. a version bumped on every override change so replicas notice. */
export const settings = sqliteTable('settings', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
});

/** Read-only console access: the token's SHA-256 only; `org_id` NULL means every org. */
export const consoleTokens = sqliteTable(
  'console_tokens',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull().default(''),
    prefix: text('prefix').notNull(),
    tokenHash: text('token_hash').notNull().unique(),
    orgId: text('org_id').references(() => orgs.id),
    createdAt: integer('created_at').notNull(),
    revokedAt: integer('revoked_at'),
  },
  (t) => [index('console_tokens_prefix_idx').on(t.prefix)],
);

/**
 * A monthly spend budget of an org (customer_id ''), of one customer, or of
 * every customer ('*'); money as decimal text. The webhook secret signs
 * alerts (HMAC-SHA256), so it is kept, and shown once at creation.
 */
export const budgets = sqliteTable(
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
    webhookSecretPreviousUntil: integer('webhook_secret_previous_until'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [uniqueIndex('budgets_scope_idx').on(t.orgId, t.customerId)],
);

/**
 * One alert per key, whatever the number of replicas: a threshold crossed (budget, customer, month, threshold), a
 * month-end projected over the budget (once a month), a day's spend far above its baseline (customer or model, once a
 * day). Delivered through a lease: `delivery` is pending, delivered (a POST answered 2xx) or none (no webhook).
 */
export const budgetEvents = sqliteTable(
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
    createdAt: integer('created_at').notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: integer('next_attempt_at').notNull(),
    claimedBy: text('claimed_by'),
    claimedUntil: integer('claimed_until'),
    deliveredAt: integer('delivered_at'),
    lastError: text('last_error'),
    delivery: text('delivery').notNull().default('pending'),
    /** Figures of the alert's kind (projection, baseline), as JSON with decimal strings; never a customer id. */
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
export const auditLog = sqliteTable(
  'audit_log',
  {
    id: text('id').primaryKey(),
    at: integer('at').notNull(),
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
export const priceCatalogs = sqliteTable('price_catalogs', {
  id: text('id').primaryKey(),
  source: text('source').notNull(),
  date: text('date').notNull(),
  sha256: text('sha256').notNull().unique(),
  data: text('data').notNull(),
  importedAt: integer('imported_at').notNull(),
  importedBy: text('imported_by').notNull().default(''),
});

/** Prices adopted from the second catalog (`prices audit --adopt`), one per (provider, model). */
export const priceAdoptions = sqliteTable(
  'price_adoptions',
  {
    id: text('id').primaryKey(),
    provider: text('provider').notNull(),
    model: text('model').notNull(),
    validFrom: text('valid_from').notNull(),
    source: text('source').notNull(),
    prices: text('prices').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [uniqueIndex('price_adoptions_key_idx').on(t.provider, t.model)],
);
