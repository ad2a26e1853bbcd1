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
    webhookSecret: text('webhook_secret'),
    createdAt: int64('created_at').notNull(),
  },
  (t) => [uniqueIndex('budgets_scope_idx').on(t.orgId, t.customerId)],
);

export const budgetEvents = pgTable(
  'budget_events',
  {
    id: text('id').primaryKey(),
    budgetId: text('budget_id').notNull(),
    orgId: text('org_id').notNull(),
    customerId: text('customer_id').notNull(),
    month: text('month').notNull(),
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
  },
  (t) => [
    uniqueIndex('budget_events_key_idx').on(t.budgetId, t.customerId, t.month, t.threshold),
    index('budget_events_due_idx').on(t.deliveredAt, t.nextAttemptAt),
  ],
);
