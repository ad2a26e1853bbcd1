import type { PriceOverride } from '@trace-ingest/shared/price-engine';

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
}

export interface ApiKeyInfo {
  id: string;
  orgId: string;
  orgName: string;
  name: string;
  prefix: string;
  createdAt: number;
  revokedAt: number | null;
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

/** The plan every org gets unless told otherwise; created by the first migration run. */
export const DEFAULT_PLAN = { name: 'default', monthlySpans: 100_000_000, rateLimitRps: 1000 } as const;

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

  /** Creates a key; `key` may be supplied (headless init) or is generated with a CSPRNG. */
  createKey(input: { orgName: string; name?: string; key?: string }): Promise<CreatedKey>;
  listKeys(filter?: { orgName?: string }): Promise<ApiKeyInfo[]>;
  /** Revoke by id or prefix; throws UsageError when none or several match. */
  revokeKey(prefixOrId: string): Promise<ApiKeyInfo>;

  /** Spans counted for the org in a UTC calendar month (`YYYY-MM`). */
  getMonthUsage(orgId: string, month: string): Promise<number>;
  /** Adds n spans to the month's usage atomically; returns the new total. */
  addMonthUsage(orgId: string, month: string, n: number): Promise<number>;

  hasKeyHash(sha256Hex: string): Promise<boolean>;

  listPriceOverrides(): Promise<PriceOverrideRecord[]>;
  /** Replaces the override with the same (org, provider, model, validFrom). */
  setPriceOverride(input: PriceOverrideInput): Promise<PriceOverrideRecord>;
  /** Removes matching overrides (all validFrom when omitted); returns how many. */
  unsetPriceOverride(match: { orgId: string; provider: string; model: string; validFrom?: number }): Promise<number>;
  /** Changes whenever overrides change, so a running server reloads them cheaply. */
  priceOverridesVersion(): Promise<string>;
}
