import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Logger } from 'pino';
import { auditPrices, bundledSecondCatalog, secondCatalogTag } from '@trace-ingest/shared/price-audit';
import { normalizeProvider } from '@trace-ingest/shared/price-engine';
import { z } from 'zod';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { randomUUID } from 'node:crypto';
import {
  BadRequestError,
  HostNotAllowedError,
  MethodNotAllowedError,
  NotFoundError,
  ServiceUnavailableError,
  UnauthorizedError,
} from '@trace-ingest/shared/errors';
import { DAY_MS, eachDay, parseUtcDay, utcDay } from '@trace-ingest/shared/dates';
import { utcMonth } from '@trace-ingest/shared/ids';
import type { PriceQuote } from '@trace-ingest/shared/price-engine';
import type { Pricing } from '@trace-ingest/store/pricing';
import type { ConsoleGrant, ConsoleTokens } from '@trace-ingest/store/console-tokens';
import type { BudgetStatus, OrgBudgetStatus } from './budgets.js';
import type { ControlStore, Org } from '@trace-ingest/store/control-store-types';
import { countGroups, dailyCosts, groupLabels, RefreshScope, traceSpans, usageReport, usageTotals } from '@trace-ingest/store/reports';
import type { SpanStore } from '@trace-ingest/store/span-store';
import { errorMiddleware } from './app.js';
import type { AuthFailures } from './auth-failures.js';
import { presentedBearer } from './auth.js';
import type { Metrics } from './metrics.js';

/**
 * The read-only cost console: the page bundle at /console/ and the JSON API
 * it calls at /console/api/*, on a listener of its own (CONSOLE_HOST,
 * loopback by default). Every API answer needs a console token; the figures
 * come from the same report queries as `trace-ingest usage`, as exact
 * decimal strings.
 */

export interface ConsoleDeps {
  tokens: ConsoleTokens;
  keys: ControlStore;
  spans: SpanStore;
  /** Unit prices in force, and where they come from (catalog or override). */
  prices: Pick<Pricing, 'engine' | 'refresh'>;
  logger: Logger;
  metrics: Metrics;
  /** The built page; default: the @trace-ingest/console package's dist/. */
  assetsDir?: string;
  /** Budgets, this month's spend and forecasts of an org and its customers (the server's budget watcher). */
  budgets?: (orgId: string) => Promise<{ budget: OrgBudgetStatus; customers: Record<string, BudgetStatus> }>;
  now?: () => number;
  /** Host names the console answers to (port aside); see consoleHosts. */
  allowedHosts?: readonly string[];
  /** Failed authentications per client address, shared with the other listeners. */
  failures?: AuthFailures;
  trustProxy?: string | false;
}

/** The names the console answers to: loopback's, the address it listens on (unless a wildcard), and CONSOLE_ALLOWED_HOSTS. */
export function consoleHosts(listenHost: string, configured: readonly string[]): string[] {
  const own = ['0.0.0.0', '::', '[::]'].includes(listenHost) ? [] : [listenHost.toLowerCase()];
  return [...new Set(['localhost', '127.0.0.1', '[::1]', ...own.map(bracketed), ...configured.map(bracketed)])];
}

const bracketed = (h: string): string => (h.includes(':') && !h.startsWith('[') ? `[${h}]` : h);

/** The host name of a Host header, without its port. */
function hostName(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  return h.replace(/:\d+$/, '');
}

/** The console API route a request matched, without the ids in its path (logs keep no trace ids). */
function routeOf(req: Request): string {
  const r = (req as Request & { route?: { path?: unknown } }).route?.path;
  return typeof r === 'string' ? `/console/api${r}` : 'other';
}

const MAX_DAYS = 366;
/** The customers page lists the customers of the largest cost, this many at most. */
const MAX_CUSTOMERS = 1000;
const MAX_TRACES = 200;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

const RangeQuery = z.object({
  org: z.string({ error: 'is required: an org name or id' }).min(1, { message: 'is required: an org name or id' }),
  from: z.string().regex(DATE, { message: 'must be a date YYYY-MM-DD' }).optional(),
  to: z.string().regex(DATE, { message: 'must be a date YYYY-MM-DD' }).optional(),
});

/** Where the built page is; undefined when the console package has not been built. */
export function defaultAssetsDir(): string | undefined {
  try {
    return path.dirname(createRequire(import.meta.url).resolve('@trace-ingest/console/dist/index.html'));
  } catch {
    return undefined;
  }
}

export function createConsoleApp(deps: ConsoleDeps): express.Express {
  const now = deps.now ?? Date.now;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', deps.trustProxy ?? false);
  const hosts = new Set(deps.allowedHosts ?? consoleHosts('127.0.0.1', []));
  app.use((req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('X-Frame-Options', 'DENY');
    // A page loaded under another name (a DNS name rebound to this address) must not reach the API with its own origin.
    const host = hostName(req.headers.host ?? '');
    if (!hosts.has(host)) throw new HostNotAllowedError(host);
    next();
  });

  const api = express.Router();
  api.use(apiLog(deps.logger));
  api.use(async (req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Cache-Control', 'no-store');
    if (req.method !== 'GET') throw new MethodNotAllowedError(req.method, `/console/api${req.path}`, ['GET']);
    const token = presentedBearer(req);
    const missing =
      'missing, invalid or revoked console token: send it as "Authorization: Bearer <token>"; create one with "trace-ingest console token create"';
    if (token === undefined) throw new UnauthorizedError(missing);
    deps.failures?.check(req.ip, 'console');
    const grant = await deps.tokens.resolve(token);
    if (grant === null) {
      deps.failures?.fail(req.ip, 'console');
      throw new UnauthorizedError(missing);
    }
    res.locals.grant = grant;
    res.locals.tokenPrefix = token.slice(0, 12);
    next();
  });

  const visibleOrgs = async (grant: ConsoleGrant): Promise<Org[]> => (await deps.keys.listOrgs()).filter((o) => grant.orgId === null || o.id === grant.orgId);

  /** The org a request names, if the token may see it; the same answer for "unknown" and "not yours". */
  const orgOf = async (res: Response, nameOrId: string): Promise<Org> => {
    const grant = res.locals.grant as ConsoleGrant;
    const org = await deps.keys.getOrg(nameOrId);
    if (org === null || (grant.orgId !== null && grant.orgId !== org.id))
      throw new NotFoundError(`unknown org "${nameOrId}"; GET /console/api/orgs lists the orgs this token may see`);
    return org;
  };

  const rangeOf = (req: Request) => {
    const r = RangeQuery.safeParse(req.query);
    if (!r.success) throw new BadRequestError('TI_ERR_BAD_REQUEST', r.error.issues.map((i) => `${String(i.path[0] ?? 'query')}: ${i.message}`).join('; '));
    const today = utcDay(now());
    const to = r.data.to ?? today;
    const from = r.data.from ?? `${to.slice(0, 7)}-01`;
    const fromDay = parseUtcDay(from);
    const toDay = parseUtcDay(to);
    if (fromDay === undefined || toDay === undefined) throw new BadRequestError('TI_ERR_BAD_REQUEST', 'from/to: not a calendar date');
    const fromMs = fromDay;
    const toMs = toDay + DAY_MS;
    if (toMs <= fromMs) throw new BadRequestError('TI_ERR_BAD_REQUEST', `to (${to}) must not be before from (${from})`);
    if ((toMs - fromMs) / DAY_MS > MAX_DAYS) throw new BadRequestError('TI_ERR_BAD_REQUEST', `a range covers at most ${MAX_DAYS} days (got ${from} to ${to})`);
    return { org: r.data.org, from, to, fromMs, toMs, days: daysOf(fromMs, toMs) };
  };

  api.get('/orgs', async (_req, res) => {
    const orgs = await visibleOrgs(res.locals.grant as ConsoleGrant);
    res.json({ orgs: orgs.map((o) => ({ id: o.id, name: o.name, plan: o.planName })) });
  });

  api.get('/overview', async (req, res) => {
    const q = rangeOf(req);
    const org = await orgOf(res, q.org);
    // Two measures per model and day, packed: a full report by day and model would sum and convert twenty.
    const perDay = await dailyCosts(deps.spans, { orgId: org.id, from: q.fromMs, to: q.toMs, by: 'model' });
    const byModel = await usageReport(deps.spans, { orgId: org.id, from: q.fromMs, to: q.toMs, by: 'model' });
    const month = utcMonth(now());
    const monthStart = Date.parse(`${month}-01T00:00:00Z`);
    const [monthRows, counted, plan] = await Promise.all([
      usageReport(deps.spans, { orgId: org.id, from: monthStart, to: now() + 1, by: 'model' }),
      deps.keys.getMonthUsage(org.id, month),
      deps.keys.listPlans().then((ps) => ps.find((p) => p.name === org.planName)),
    ]);
    const monthTotal = usageTotals(monthRows);
    const quota = plan?.monthlySpans ?? 0;
    const budgets = await deps.budgets?.(org.id);
    res.json({
      budget: budgets === undefined || budgets.budget.budgetUsd === null ? null : budgets.budget,
      forecast: budgets?.budget.forecast ?? null,
      org: orgJson(org),
      range: { from: q.from, to: q.to },
      days: q.days,
      models: byModel.map((r) => r.group),
      series: perDay.map((r) => ({ day: r.day, model: r.group, spans: r.spans, cost: r.cost })),
      rows: byModel,
      total: usageTotals(byModel),
      monthToDate: {
        month,
        spansCounted: counted,
        quotaSpans: quota,
        quotaUsed: quota === 0 ? null : percent(counted, quota),
        spansStored: monthTotal.spans,
        cost: monthTotal.costs.total_cost,
      },
    });
  });

  api.get('/customers', async (req, res) => {
    const q = rangeOf(req);
    const org = await orgOf(res, q.org);
    const [rows, byDay] = await Promise.all([
      usageReport(deps.spans, { orgId: org.id, from: q.fromMs, to: q.toMs, by: 'customer', limit: MAX_CUSTOMERS }),
      usageReport(deps.spans, { orgId: org.id, from: q.fromMs, to: q.toMs, by: 'day' }),
    ]);
    const perDay = await dailyCosts(deps.spans, { orgId: org.id, from: q.fromMs, to: q.toMs, by: 'customer', groups: rows.map((r) => r.group) });
    const index = new Map(q.days.map((d, i) => [d, i]));
    const daily: Record<string, string[]> = {};
    for (const r of perDay) {
      const series = (daily[r.group] ??= q.days.map(() => '0'));
      const i = index.get(r.day);
      if (i !== undefined) series[i] = r.cost;
    }
    const labels = await groupLabels(deps.spans, { orgId: org.id, from: q.fromMs, to: q.toMs, by: 'customer', groups: rows.map((r) => r.group) });
    const names = Object.fromEntries(Object.entries(labels).map(([id, l]) => [id, l.name]));
    const budgets = (await deps.budgets?.(org.id))?.customers ?? {};
    const shown = rows.filter((r) => budgets[r.group] !== undefined);
    // The total counts every customer, shown or not (the days add up to it).
    res.json({
      org: orgJson(org),
      range: { from: q.from, to: q.to },
      days: q.days,
      rows,
      total: usageTotals(byDay),
      daily,
      names,
      // This month's spend against the budget that governs each shown customer, and where its month will end.
      budgets: Object.fromEntries(shown.filter((r) => budgets[r.group]?.budgetUsd !== null).map((r) => [r.group, budgets[r.group]])),
      forecasts: Object.fromEntries(shown.flatMap((r) => (budgets[r.group]?.forecast == null ? [] : [[r.group, budgets[r.group]?.forecast]]))),
    });
  });

  api.get('/models', async (req, res) => {
    const q = rangeOf(req);
    const org = await orgOf(res, q.org);
    const rows = await usageReport(deps.spans, { orgId: org.id, from: q.fromMs, to: q.toMs, by: 'model', then: 'provider' });
    await deps.prices.refresh();
    // The prices in force at the end of the range (or now, if sooner).
    const at = Math.min(q.toMs - 1, now());
    const second = bundledSecondCatalog();
    const findings = auditPrices(deps.prices.engine, second, {
      at,
      only: rows.filter((r) => r.group !== '').map((r) => ({ provider: r.subgroup ?? '', model: r.group })),
    });
    const flagOf = (model: string, provider: string) => {
      const f = findings.find((x) => (x.seenAs ?? []).includes(model) && (provider === '' || x.provider === normalizeProvider(provider)));
      return f === undefined ? null : { catalog: secondCatalogTag(second.meta), status: f.status, diffs: f.diffs };
    };
    const withPrices = rows.map((r) => ({
      ...r,
      price:
        r.group === ''
          ? null
          : quoteJson(deps.prices.engine.quote({ orgId: org.id, provider: r.subgroup === '' ? undefined : r.subgroup, model: r.group, at })),
      secondCatalog: r.group === '' ? null : flagOf(r.group, r.subgroup ?? ''),
    }));
    const unpriced = rows
      .filter((r) => r.unpricedSpans > 0)
      .map((r) => ({
        model: r.group,
        provider: r.subgroup ?? '',
        spans: r.unpricedSpans,
        fix: fixLine(r.group, r.subgroup ?? ''),
        reprice: `trace-ingest reprice --org ${shellQuote(org.name)} --from ${q.from} --to ${q.to} --model ${shellQuote(r.group)}`,
      }))
      .sort((a, b) => b.spans - a.spans || a.model.localeCompare(b.model));
    res.json({
      org: orgJson(org),
      range: { from: q.from, to: q.to },
      pricesAt: new Date(at).toISOString(),
      rows: withPrices,
      total: usageTotals(rows),
      unpriced,
    });
  });

  api.get('/traces', async (req, res) => {
    const q = rangeOf(req);
    const org = await orgOf(res, q.org);
    const window = { orgId: org.id, from: q.fromMs, to: q.toMs };
    // The ranking, the count and the labels read one build of each day's list.
    const scope = new RefreshScope();
    const [rows, count, byModel] = await Promise.all([
      usageReport(deps.spans, { ...window, by: 'trace', limit: MAX_TRACES }, scope),
      countGroups(deps.spans, { ...window, by: 'trace' }, scope),
      usageReport(deps.spans, { ...window, by: 'model' }),
    ]);
    const labels = await groupLabels(deps.spans, { ...window, by: 'trace', groups: rows.map((r) => r.group) }, scope);
    // The total of the whole range, not of the traces shown.
    res.json({ org: orgJson(org), range: { from: q.from, to: q.to }, rows, count, total: usageTotals(byModel), labels });
  });

  api.get('/traces/:traceId', async (req, res) => {
    const org = await orgOf(res, typeof req.query.org === 'string' ? req.query.org : '');
    const traceId = req.params.traceId ?? '';
    const spans = await traceSpans(deps.spans, { orgId: org.id, traceId });
    if (spans.length === 0) throw new NotFoundError(`no trace "${traceId}" in org "${org.name}"`);
    const start = Math.min(...spans.map((s) => s.start_time));
    const end = Math.max(...spans.map((s) => s.end_time));
    const first = spans[0];
    res.json({
      org: orgJson(org),
      traceId,
      traceName: first?.trace_name ?? '',
      customerId: first?.customer_id ?? '',
      start: new Date(start).toISOString(),
      durationMs: end - start,
      totalCost: formatDecimal(spans.reduce((acc, s) => acc + parseDecimal(s.total_cost), 0n)),
      // Costs, tokens and timing only: prompts and outputs stay out of the console.
      spans: spans.map((s) => ({
        spanId: s.span_id,
        parentSpanId: s.parent_span_id,
        name: s.name,
        spanType: s.span_type,
        status: s.status,
        provider: s.provider,
        model: s.model_id,
        serviceTier: s.service_tier,
        region: s.region,
        offsetMs: s.start_time - start,
        durationMs: s.end_time - s.start_time,
        inputTokens: s.input_tokens,
        cachedInputTokens: s.cached_input_tokens,
        cacheWriteInputTokens: s.cache_write_input_tokens,
        outputTokens: s.output_tokens,
        reasoningTokens: s.reasoning_tokens,
        cacheWrite1hInputTokens: s.cache_write_1h_input_tokens,
        audioInputTokens: s.audio_input_tokens,
        cachedAudioInputTokens: s.cached_audio_input_tokens,
        audioOutputTokens: s.audio_output_tokens,
        totalTokens: s.total_tokens,
        cost: s.total_cost,
        priced: s.priced,
        priceSource: s.price_source,
      })),
    });
  });
  api.use((req) => {
    throw new NotFoundError(`no console API route for ${req.method} ${req.path}; see /openapi.json on the ingest port`);
  });

  app.use('/console/api', api);
  const assets = deps.assetsDir ?? defaultAssetsDir();
  if (assets !== undefined && fs.existsSync(path.join(assets, 'index.html'))) {
    app.get('/', (_req, res) => res.redirect(302, '/console/'));
    app.use((req, res, next) => {
      // Relative asset URLs need the trailing slash; '/console/' itself must not match here.
      if (req.path === '/console') res.redirect(301, '/console/');
      else next();
    });
    app.use(
      '/console',
      express.static(assets, {
        index: 'index.html',
        fallthrough: true,
        setHeaders: (res, file) => {
          // Hashed file names under assets/ never change; the page itself is always re-read.
          res.setHeader('Cache-Control', file.includes(`${path.sep}assets${path.sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache');
          res.setHeader(
            'Content-Security-Policy',
            "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; connect-src 'self'; " +
              "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
          );
        },
      }),
    );
  } else {
    app.use('/console', () => {
      throw new ServiceUnavailableError('the console page is not built: run "npm run build" (it bundles packages/console), then restart');
    });
  }
  app.use((req) => {
    throw new NotFoundError(`no route for ${req.method} ${req.path}; the console is at /console/`);
  });
  app.use(errorMiddleware(deps.logger, deps.metrics));
  return app;
}

/** One info line per console API request: route, status, time, the token's prefix and org; never the token, ids or query values. */
function apiLog(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = performance.now();
    const reqId = randomUUID();
    res.once('finish', () => {
      const grant = res.locals.grant as ConsoleGrant | undefined;
      logger.info(
        {
          reqId,
          listener: 'console',
          method: req.method,
          route: routeOf(req),
          status: res.statusCode,
          durationMs: Math.round((performance.now() - started) * 100) / 100,
          tokenPrefix: res.locals.tokenPrefix as string | undefined,
          tokenOrg: grant === undefined ? undefined : (grant.orgId ?? '*'),
          code: res.locals.errorCode as string | undefined,
        },
        'console request',
      );
    });
    next();
  };
}

function orgJson(o: Org) {
  return { id: o.id, name: o.name, plan: o.planName };
}

/** Every UTC day in [fromMs, toMs) as YYYY-MM-DD. */
function daysOf(fromMs: number, toMs: number): string[] {
  return eachDay(utcDay(fromMs), utcDay(toMs));
}

/** counted / quota as a percentage with two decimals, exactly (no float). */
function percent(counted: number, quota: number): string {
  return formatDecimal(((BigInt(counted) * 10_000n) / BigInt(quota)) * 10n ** 16n);
}

function quoteJson(q: PriceQuote | null) {
  if (q === null) return null;
  return {
    source: q.source,
    provider: q.provider,
    model: q.model,
    inputPerMtok: q.inputPerMtok,
    cachedInputPerMtok: q.cachedInputPerMtok,
    cacheWriteInputPerMtok: q.cacheWriteInputPerMtok,
    outputPerMtok: q.outputPerMtok,
    reasoningPerMtok: q.reasoningPerMtok,
    cacheWrite1hInputPerMtok: q.cacheWrite1hInputPerMtok,
    audioInputPerMtok: q.audioInputPerMtok,
    cachedAudioInputPerMtok: q.cachedAudioInputPerMtok,
    audioOutputPerMtok: q.audioOutputPerMtok,
    imageEach: q.imageEach,
    webSearchEach: q.webSearchEach,
    requestEach: q.requestEach,
    tiers: q.tiers,
  };
}

/** Quoted for a POSIX shell only when needed, so the common line stays readable. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9._:/@+=-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

/** The command that prices a model; the two prices are the operator's to fill in. */
export function fixLine(model: string, provider: string): string {
  return (
    `trace-ingest prices set ${shellQuote(model)}${provider === '' ? '' : ` --provider ${shellQuote(provider)}`} ` +
    `--input <USD per 1M input tokens> --output <USD per 1M output tokens>`
  );
}
