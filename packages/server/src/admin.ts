import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import express from 'express';
import type { Logger } from 'pino';
import { z } from 'zod';
import { BadRequestError, TiError } from '@trace-ingest/shared/errors';
import { auditErase, auditReprice } from '@trace-ingest/store/audit';
import type { ControlStore } from '@trace-ingest/store/control-store-types';
import { diskForecast } from '@trace-ingest/store/disk-forecast';
import { readForecastInputs } from '@trace-ingest/store/forecast';
import { exportCount, exportLines, exportRows } from '@trace-ingest/store/export';
import { focusLines, focusRecords } from '@trace-ingest/store/focus';
import { GROUPS, reprice, usageReport } from '@trace-ingest/store/reports';
import { ReadOnlyQueryError, type SpanStore } from '@trace-ingest/store/span-store';
import { errorMiddleware } from './app.js';
import type { Pricing } from '@trace-ingest/store/pricing';
import type { Metrics } from './metrics.js';

const Window = { orgId: z.string().min(1), from: z.number().int(), to: z.number().int() };
/** Who asked, as the CLI says (user@host); a request without it is recorded as the socket's owner's. */
const Actor = { actor: z.string().min(1).max(200).optional() };
const UsageBody = z.strictObject({
  ...Window,
  by: z.enum(Object.keys(GROUPS) as [keyof typeof GROUPS]),
  customerId: z.string().optional(),
  limit: z.number().int().min(1).max(100_000).optional(),
});
const EraseBody = z.strictObject({
  orgId: z.string().min(1),
  kind: z.enum(['customer', 'trace', 'session']),
  id: z.string().min(1).max(10_000),
  dryRun: z.boolean().default(false),
  ...Actor,
});
const RepriceBody = z.strictObject({ ...Window, model: z.string().optional(), ...Actor });
const QueryBody = z.strictObject({
  sql: z.string().min(1).max(100_000),
  params: z.array(z.unknown()).max(1000).default([]),
  // A query over a year of spans must not be held whole in the server.
  maxRows: z.number().int().min(1).max(1_000_001).default(100_000),
});

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) throw new BadRequestError('TI_ERR_ADMIN_REQUEST', r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  return r.data;
}

/** What the admin socket does beside the span store: its audit log, and telling the rest of the server about an erasure. */
export interface AdminHooks {
  /** Where the routes that change stored spans (erase, reprice) record themselves. */
  audit?: ControlStore;
  /** A customer's spans were erased: what the server holds of it in memory (its metrics) goes too. */
  onErased?: (orgId: string, kind: 'customer' | 'trace' | 'session', id: string) => void;
}

/** The socket's owner, who alone can connect (0600): the actor of a request that names none. */
function socketOwner(): string {
  let user = 'unknown';
  try {
    user = os.userInfo().username;
  } catch {
    // no passwd entry (a container's arbitrary uid)
  }
  return `${user}@${os.hostname()} (admin socket)`;
}

/**
 * The CLI's way into a running server: HTTP over a Unix socket in DATA_DIR,
 * readable and writable by the owner only, never on the network. DuckDB lets
 * one process hold its file, so reports, ad-hoc queries and repricing run
 * here, on the server's own connection. The routes that change stored spans
 * write their audit entries here, whoever posted to the socket.
 */
export class AdminServer {
  private server: http.Server | undefined;

  constructor(
    private readonly socketPath: string,
    private readonly spans: SpanStore,
    private readonly pricing: Pick<Pricing, 'refresh' | 'price'>,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    /** The main listener's port, and the console's URL when it is on, so the CLI finds them wherever they listen. */
    private readonly port: () => number | undefined = () => undefined,
    private readonly consoleUrl: () => string | undefined = () => undefined,
    private readonly hooks: AdminHooks = {},
  ) {}

  async start(): Promise<void> {
    const app = this.app();
    await removeStaleSocket(this.socketPath);
    const server = http.createServer(app);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
    fs.chmodSync(this.socketPath, 0o600);
    this.server = server;
  }

  /** The socket's routes (its own method, so the route-by-credential table can be checked against them). */
  app(): express.Express {
    const app = express();
    app.use(express.json({ limit: '1mb' }));
    app.get('/v1/ping', (_req, res) => {
      res.json({ ok: true, spanStore: this.spans.kind, port: this.port(), consoleUrl: this.consoleUrl() });
    });
    app.post('/v1/query', async (req, res) => {
      const b = parse(QueryBody, req.body);
      try {
        res.json({ rows: await this.spans.readOnlyQuery(b.sql, b.params, b.maxRows) });
      } catch (e) {
        if (e instanceof ReadOnlyQueryError) throw new BadRequestError('TI_ERR_READ_ONLY', e.message);
        if (e instanceof TiError) throw e;
        throw new BadRequestError('TI_ERR_QUERY', e instanceof Error ? e.message : String(e));
      }
    });
    app.post('/v1/usage', async (req, res) => {
      res.json({ rows: await usageReport(this.spans, parse(UsageBody, req.body)) });
    });
    // An export's rows as canonical lines, streamed as the store yields them (the CLI writes the file).
    app.post('/v1/export/rows', async (req, res) => {
      const f = parse(z.strictObject(Window), req.body);
      const total = await exportCount(this.spans, f);
      await streamLines(res, exportLines(exportRows(this.spans, f)), total);
    });
    // FOCUS chargeback rows (one JSON object a line), streamed likewise; their number is known once written.
    app.post('/v1/export/focus', async (req, res) => {
      const f = parse(z.strictObject({ ...Window, orgName: z.string() }), req.body);
      await streamLines(res, focusLines(focusRecords(this.spans, f)), 0);
    });
    // What a month-end forecast reads of an org (the CLI's `usage` computes it with the org's budgets).
    app.post('/v1/forecast', async (req, res) => {
      const b = parse(z.strictObject({ orgId: z.string().min(1), now: z.number().int() }), req.body);
      res.json(await readForecastInputs(this.spans, b.orgId, b.now));
    });
    app.post('/v1/erase', async (req, res) => {
      const b = parse(EraseBody, req.body);
      const target = { kind: b.kind, id: b.id };
      const counts = await this.spans.erase(b.orgId, target, b.dryRun);
      if (!b.dryRun) {
        if (b.kind === 'customer') this.hooks.onErased?.(b.orgId, b.kind, b.id);
        if (this.hooks.audit !== undefined) await auditErase(this.hooks.audit, { actor: b.actor ?? socketOwner(), orgId: b.orgId, target, counts });
      }
      res.json(counts);
    });
    app.get('/v1/disk', async (_req, res) => {
      res.json(await diskForecast(this.spans));
    });
    app.post('/v1/reprice', async (req, res) => {
      const { actor, ...filter } = parse(RepriceBody, req.body);
      await this.pricing.refresh();
      const result = await reprice(this.spans, this.pricing.price, filter);
      if (this.hooks.audit !== undefined) await auditReprice(this.hooks.audit, { actor: actor ?? socketOwner(), filter, result });
      res.json(result);
    });
    app.use(errorMiddleware(this.logger, this.metrics));
    return app;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (s === undefined) return;
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
    fs.rmSync(this.socketPath, { force: true });
  }
}

/** NDJSON chunks as the store yields them, waiting whenever the client's socket is full. */
async function streamLines(res: express.Response, chunks: AsyncIterable<Buffer>, total: number): Promise<void> {
  res.setHeader('content-type', 'application/x-ndjson');
  res.setHeader('x-total-rows', String(total));
  for await (const chunk of chunks) {
    if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
    if (res.destroyed) return;
  }
  res.end();
}

/** Removes a socket file left by a killed server; one another process still listens on is kept and refused. */
async function removeStaleSocket(p: string): Promise<void> {
  try {
    if (!fs.statSync(p).isSocket()) return;
  } catch {
    return; // absent
  }
  const live = await new Promise<boolean>((resolve) => {
    const probe = net.connect(p);
    probe.setTimeout(1000, () => {
      probe.destroy();
      // A listener too busy to accept within a second is still a listener.
      resolve(true);
    });
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
  if (live) throw new Error(`another process listens on ${p}: it is left in place (one server per DATA_DIR)`);
  fs.rmSync(p, { force: true });
}
