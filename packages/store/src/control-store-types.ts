import type { PriceOverride } from '@trace-ingest/shared/price-engine';
import type { KeyScope } from '@trace-ingest/shared/scopes';

/**
 * Orgs, plans, API keys and quota usage. SQLite by default, PostgreSQL when
 * DATABASE_URL is set; one implementation (`SqlControlStore` in control-store.ts)
 * over a driver per dialect.
 */

export interface Plan {
  id: string;
  name: string;
  monthlySpans: number;
  rateLimitRps: number;
  createdAt: number;
}

export interface Org {
  id: string;
  name: string;
  planId: string;
  planName: string;
  createdAt: number;
  /** Days rows are kept; null: the install's default (RETENTION_DAYS). */
  retentionDays: number | null;
  /** Days texts are kept; null: the install's default (TEXT_RETENTION_DAYS). */
  textDays: number | null;
  /** The content policy as stored JSON (`@trace-ingest/shared/content-policy`); null: record as sent. */
  contentPolicy: string | null;
}

/** One entry of the audit log: who did what to which org's data, never the data. */
export interface AuditEntry {
  id: string;
  at: number;
  actor: string;
  action: string;
  orgId: string;
  target: string;
  /** JSON: counts and settings, never span content. */
  detail: string;
}

export interface ApiKeyInfo {
  id: string;
  orgId: string;
  orgName: string;
  name: string;
  prefix: string;
  createdAt: number;
  revokedAt: number | null;
  /** What the key may do. */
  scopes: KeyScope[];
  /** The customers a budget:read key may read; null: every customer of its org. */
  customers: string[] | null;
}

/** What the hot path needs to know about a presented, non-revoked key. */
export interface ResolvedKey {
  keyId: string;
  prefix: string;
  orgId: string;
  orgName: string;
  planName: string;
  monthlySpans: number;
  rateLimitRps: number;
  /** The org's content policy (stored JSON), applied before the batch reaches the write log. */
  contentPolicy: string | null;
  /** The org's text retention in days (null: the default): a span older than that is written without its texts. */
  textDays: number | null;
  /** What the key may do (a route checks its own with requireScope). */
  scopes: KeyScope[];
  /** The customers a budget:read key may read; null: every customer of its org. */
  customers: string[] | null;
}

export interface CreatedKey extends ApiKeyInfo {
  /** The full key; shown once, never stored. */
  key: string;
}

/** An override as stored: the price engine's `PriceOverride` without its id. */
export type PriceOverrideInput = Omit<PriceOverride, 'id'>;

export interface PriceOverrideRecord extends PriceOverrideInput {
  id: string;
  createdAt: number;
}

/** An imported price catalog (its data apart: it is large). */
export interface CatalogRecord {
  id: string;
  source: string;
  date: string;
  sha256: string;
  importedAt: number;
  importedBy: string;
}

/** A price adopted from the second catalog; `prices` is genai-prices' price object as JSON. */
export interface AdoptionRecord {
  id: string;
  provider: string;
  model: string;
  validFrom: string;
  source: string;
  prices: string;
  createdAt: number;
}

/** The plan every org gets unless told otherwise; created by the first migration run. */
export const DEFAULT_PLAN = { name: 'default', monthlySpans: 100_000_000, rateLimitRps: 1000 } as const;

/** One accepted batch's spans, under its fingerprint (see batchFingerprint). */
export interface UsageBatchCount {
  id: string;
  spans: number;
}

/** How long a counted batch is remembered: a resend later than this is counted again. */
export const USAGE_BATCH_MEMORY_MS = 3_600_000;

export interface ControlStore {
  readonly kind: 'sqlite' | 'postgres';
  start(): Promise<void>;
  close(): Promise<void>;
  ping(): Promise<void>;

  /** Look a key up by the hex SHA-256 of the presented key; null when unknown or revoked. */
  resolveKeyHash(sha256Hex: string): Promise<ResolvedKey | null>;

  createPlan(input: { name: string; monthlySpans: number; rateLimitRps: number }): Promise<Plan>;
  updatePlan(name: string, patch: { monthlySpans?: number; rateLimitRps?: number }): Promise<Plan>;
  listPlans(): Promise<Plan[]>;

  createOrg(input: { name: string; planName?: string }): Promise<Org>;
  setOrgPlan(orgName: string, planName: string): Promise<Org>;
  listOrgs(): Promise<Org[]>;
  getOrg(nameOrId: string): Promise<Org | null>;
  /** Sets an org's retention; null puts a setting back to the install's default. */
  setOrgRetention(orgName: string, r: { days?: number | null; textDays?: number | null }): Promise<Org>;
  /** Sets an org's content policy (validated JSON) or, with null, removes it. */
  setOrgContentPolicy(orgName: string, policyJson: string | null): Promise<Org>;

  appendAudit(e: Omit<AuditEntry, 'id' | 'at'> & { at?: number }): Promise<AuditEntry>;
  /** Newest first. */
  listAudit(filter?: { orgId?: string; limit?: number }): Promise<AuditEntry[]>;

  /** Creates a key (scopes default to ingest); `key` may be supplied (headless init) or is generated with a CSPRNG. */
  createKey(input: { orgName: string; name?: string; key?: string; scopes?: readonly KeyScope[]; customers?: readonly string[] | null }): Promise<CreatedKey>;
  listKeys(filter?: { orgName?: string }): Promise<ApiKeyInfo[]>;
  /** Revoke by id or prefix; throws UsageError when none or several match. */
  revokeKey(prefixOrId: string): Promise<ApiKeyInfo>;

  /** Spans counted for the org in a UTC calendar month (`YYYY-MM`). */
  getMonthUsage(orgId: string, month: string): Promise<number>;
  /** Adds n spans to the month's usage atomically; returns the new total. */
  addMonthUsage(orgId: string, month: string, n: number): Promise<number>;
  /**
   * Adds the spans of each batch not already added (by `id`, within
   * USAGE_BATCH_MEMORY_MS) to the month's usage, in one transaction: a batch
   * sent again, to this process or another sharing the store, counts once.
   * Returns the new total.
   */
  addMonthUsageOnce(orgId: string, month: string, batches: readonly UsageBatchCount[], now: number): Promise<number>;

  hasKeyHash(sha256Hex: string): Promise<boolean>;

  listPriceOverrides(): Promise<PriceOverrideRecord[]>;
  /** Replaces the override with the same (org, provider, model, validFrom). */
  setPriceOverride(input: PriceOverrideInput): Promise<PriceOverrideRecord>;
  /** Removes matching overrides (all validFrom when omitted); returns how many. */
  unsetPriceOverride(match: { orgId: string; provider: string; model: string; validFrom?: number }): Promise<number>;
  /** Changes whenever overrides, adoptions or the catalog in force change, so a running server reloads them cheaply. */
  priceOverridesVersion(): Promise<string>;

  /** Keeps an imported catalog (once per sha256) and puts it in force; `created` false when it was there already. */
  importCatalog(c: Omit<CatalogRecord, 'id' | 'importedAt'> & { data: string }): Promise<{ record: CatalogRecord; created: boolean }>;
  listCatalogs(): Promise<CatalogRecord[]>;
  /** The imported catalog in force, with its data; null: the catalog the release ships. */
  activeCatalog(): Promise<(CatalogRecord & { data: string }) | null>;
  /** Puts an imported catalog (by id or sha256 prefix) in force, or with null the release's own. */
  useCatalog(idOrSha: string | null): Promise<CatalogRecord | null>;
  listAdoptions(): Promise<AdoptionRecord[]>;
  /** Replaces the adoption of the same (provider, model). */
  setAdoption(a: Omit<AdoptionRecord, 'id' | 'createdAt'>): Promise<AdoptionRecord>;
  /** Removes adoptions of a model (of one provider, or every provider); returns how many. */
  removeAdoption(model: string, provider?: string): Promise<number>;
}
