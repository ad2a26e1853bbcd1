/** The console's JSON API client: the token goes in the Authorization header, never in a URL. */

const TOKEN_KEY = 'trace-ingest-console-token';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const token = {
  get: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set: (t: string): void => sessionStorage.setItem(TOKEN_KEY, t),
  clear: (): void => sessionStorage.removeItem(TOKEN_KEY),
};

export async function getJson<T>(path: string, params: Record<string, string | undefined> = {}): Promise<T> {
  const qs = new URLSearchParams(Object.entries(params).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''));
  const res = await fetch(`api/${path}${qs.size > 0 ? `?${qs.toString()}` : ''}`, {
    headers: { authorization: `Bearer ${token.get() ?? ''}` },
    cache: 'no-store',
  });
  const body = (await res.json().catch(() => ({}))) as { error?: string };
  if (!res.ok) throw new ApiError(res.status, body.error ?? `request failed (${res.status})`);
  return body as T;
}

export interface Org {
  id: string;
  name: string;
  plan: string;
}

export interface UsageRow {
  group: string;
  subgroup?: string;
  spans: number;
  unpricedSpans: number;
  tokens: Record<string, number>;
  costs: Record<string, string>;
}

export interface Range {
  from: string;
  to: string;
}

/** Where the month will end (GET /v1/budget's forecast); the org's also says how far off it was on past months. */
export interface BudgetForecast {
  projectedUsd: string;
  dailyRateUsd: string;
  crossesOn: string | null;
  errorPct?: string | null;
  errorMonths?: number;
}

/** This UTC month's spend against a budget (exact decimal USD). */
export interface BudgetStatus {
  budgetUsd: string | null;
  spentUsd: string;
  remainingUsd: string | null;
  crossed: number[];
  forecast: BudgetForecast | null;
}

export interface Overview {
  /** The org's own budget this month, when one is set. */
  budget: BudgetStatus | null;
  /** The org's month-end forecast (null before a day of spend in the last 14). */
  forecast: BudgetForecast | null;
  org: Org;
  range: Range;
  days: string[];
  models: string[];
  series: { day: string; model: string; spans: number; cost: string }[];
  rows: UsageRow[];
  total: UsageRow;
  monthToDate: { month: string; spansCounted: number; quotaSpans: number; quotaUsed: string | null; spansStored: number; cost: string };
}

export interface Customers {
  org: Org;
  range: Range;
  days: string[];
  rows: UsageRow[];
  total: UsageRow;
  daily: Record<string, string[]>;
  /** Customer id → the name clients sent ('' when none). */
  names: Record<string, string>;
  /** Customer id → this month's spend against the budget that governs it, for customers with one. */
  budgets: Record<string, BudgetStatus>;
  /** Customer id → its month-end forecast. */
  forecasts: Record<string, BudgetForecast>;
}

export interface Price {
  source: string;
  provider: string;
  model: string;
  inputPerMtok: string;
  cachedInputPerMtok: string;
  cacheWriteInputPerMtok: string;
  cacheWrite1hInputPerMtok: string | null;
  audioInputPerMtok: string | null;
  cachedAudioInputPerMtok: string | null;
  audioOutputPerMtok: string | null;
  outputPerMtok: string;
  reasoningPerMtok: string;
}

/** Where the second catalog (LiteLLM's price map) disagrees with the price in force. */
export interface SecondCatalogFlag {
  catalog: string;
  status: 'differs' | 'unknown to the catalog';
  diffs: { bucket: string; tier: string; variant?: string; inForce: string | null; second: string }[];
}

export interface Models {
  org: Org;
  range: Range;
  pricesAt: string;
  rows: (UsageRow & { price: Price | null; secondCatalog: SecondCatalogFlag | null })[];
  total: UsageRow;
  unpriced: { model: string; provider: string; spans: number; fix: string; reprice: string }[];
}

export interface Traces {
  org: Org;
  range: Range;
  rows: UsageRow[];
  count: number;
  total: UsageRow;
  /** Trace id → its name and customer id. */
  labels: Record<string, { name: string; customer: string }>;
}

export interface TraceSpan {
  spanId: string;
  parentSpanId: string;
  name: string;
  spanType: string;
  status: string;
  provider: string;
  model: string;
  serviceTier: string;
  region: string;
  offsetMs: number;
  durationMs: number;
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteInputTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  cacheWrite1hInputTokens: number;
  audioInputTokens: number;
  cachedAudioInputTokens: number;
  audioOutputTokens: number;
  totalTokens: number;
  cost: string;
  priced: boolean;
  priceSource: string;
}

export interface Trace {
  org: Org;
  traceId: string;
  traceName: string;
  customerId: string;
  start: string;
  durationMs: number;
  totalCost: string;
  spans: TraceSpan[];
}
