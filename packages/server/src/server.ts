import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import path from 'node:path';
import type { Logger } from 'pino';
import { isLoopback, type Config } from '@trace-ingest/shared/config';
import { checkDataDir, ensurePrivateDir, modeText, openToOthers } from '@trace-ingest/shared/data-dir';
import { TiError } from '@trace-ingest/shared/errors';
import { hashApiKey } from '@trace-ingest/shared/ids';
import { fastValidator } from '@trace-ingest/shared/validate';
import type { ControlStore } from '@trace-ingest/store/control-store-types';
import { SqlControlStore, type ControlDriver } from '@trace-ingest/store/control-store';
import { openControlDriver, sharedControlDriver, type ControlDriverOptions } from '@trace-ingest/store/control-database';
import { Budgets } from '@trace-ingest/store/budgets';
import { secretBoxFor } from '@trace-ingest/store/secret-box';
import { parseDecimal } from '@trace-ingest/shared/decimal';
import { ConsoleTokens } from '@trace-ingest/store/console-tokens';
import type { PostgresTimeouts } from '@trace-ingest/store/control-store-postgres';
import { createSpanStore, type StoreOptions } from '@trace-ingest/store/open-stores';
import { DataDirLock } from '@trace-ingest/store/data-dir-lock';
import { leaseName, PgAdvisoryLease } from '@trace-ingest/store/pg-lease';
import { createPricing, type Pricing } from '@trace-ingest/store/pricing';
import type { SpanStore } from '@trace-ingest/store/span-store';
import { AdminServer } from './admin.js';
import { ComponentHost } from './component-host.js';
import { createApp, type AppDeps } from './app.js';
import { OtlpCodec } from './otlp-codec.js';
import { OtlpGrpcServer } from './otlp-grpc.js';
import { Authenticator } from './auth.js';
import { AuthFailures } from './auth-failures.js';
import { createMetricsApp } from './metrics-app.js';
import { routesOf } from './routes-of.js';
import type { Listener } from '@trace-ingest/shared/routes';
import type express from 'express';
import { consoleHosts, createConsoleApp } from './console.js';
import { BodySlots } from './body.js';
import { AlertDeliverer, BudgetWatcher } from './budgets.js';
import { Flusher } from './flusher.js';
import { Metrics } from './metrics.js';
import { ReconcilingQuota, StoreQuotaCounter, type QuotaCounter } from './quota.js';
import { MemoryRateLimiter, type RateLimiter } from './rate-limit.js';
import { WriteLog } from './write-log.js';
import { DiskSpace } from './disk-space.js';
import { DiskReporter } from './disk-report.js';
import { RetentionJob } from './retention.js';
import { Readiness, checkFileHandles } from './readiness.js';

export interface ServerParts {
  /** The caller's key store (the server still closes it); budgets and console tokens keep the server's own connection. */
  keyStore?: ControlStore;
  spanStore?: SpanStore;
  limiter?: RateLimiter;
  quota?: QuotaCounter;
  pricing?: Pricing;
  metrics?: Metrics;
  /** The clock of budget checks and the console's month (tests set a day; ingest itself keeps the real time). */
  now?: () => number;
}

/** Node's own answers to malformed requests (400, 408, 431) are JSON too, like every error of the service. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, reason, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'request headers are too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'the request was not received in time']
        : [400, 'Bad Request', 'malformed HTTP request'];
  const body = JSON.stringify(new TiError('TI_ERR_BAD_HTTP', message, { status }).toBody());
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Listens; a port already taken is named by the variable that chose it. */
function listen(server: http.Server, port: number, host: string, variable = 'PORT'): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const failed = (e: NodeJS.ErrnoException) =>
      reject(
        e.code === 'EADDRINUSE' ? new Error(`${variable} ${port} is already in use on ${host}: set ${variable} to a free port (0 picks one)`, { cause: e }) : e,
      );
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve();
    });
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/**
 * DuckDB's own default is 80% of RAM, which it fills with cached blocks and keeps:
 * reports read the rollups, so a fixed share is enough (a 10M-row store ran its
 * reports and reprice in it; see bench/README.md, growth).
 */
const SERVER_DUCKDB_MEMORY = '1GiB';

/**
 * Of that, what DuckDB keeps for its blocks once touched: the flusher's inserts then reuse pages where each would fault in
 * fresh ones and give them back (~15% of the flush's CPU at `small`; see bench/README.md, the DuckDB flush).
 */
const SERVER_DUCKDB_BLOCK_ALLOCATOR = '256MiB';

/** DuckDB takes no 0 for none: the setting is left out. */
const blockAllocatorMemory = (size: string): string | undefined => (size === '0' ? undefined : size);

/** The server's bounds on a PostgreSQL call, from the config. */
function postgresTimeouts(c: Config): PostgresTimeouts {
  return {
    statementMs: c.DATABASE_STATEMENT_TIMEOUT_MS,
    lockMs: c.DATABASE_LOCK_TIMEOUT_MS,
    idleInTransactionMs: c.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    queryMs: c.DATABASE_QUERY_TIMEOUT_MS,
  };
}

/**
 * The server's one connection (pool) to the control store's database. SQLite never waits for a lock on the event loop
 * (a locked file fails fast and the quota reconciler retries); PostgreSQL gets the control store's pool of 10.
 */
function controlDriverOptions(c: Config): ControlDriverOptions {
  return { sqliteFile: c.sqliteFile, databaseUrl: c.DATABASE_URL, sqliteBusyTimeoutMs: 0, postgresTimeouts: postgresTimeouts(c), poolSize: 10 };
}

/** The org of TRACE_INGEST_INIT_API_KEY when TRACE_INGEST_INIT_ORG is unset. */
export const DEFAULT_INIT_ORG = 'default';

/**
 * One ingest process: stores, write log, flusher, the HTTP listener and, when
 * configured, the OTLP/gRPC one, each a part of the component host. Shutdown
 * order: stop accepting (503, gRPC UNAVAILABLE, for the drain grace), let
 * in-flight requests finish, close the listeners, flush, close the stores.
 */
export class IngestServer {
  readonly metrics: Metrics;
  /** Failed authentications per client address, shared by every listener. */
  readonly authFailures: AuthFailures;
  /** Starts the parts in order and closes them in reverse. */
  private readonly host: ComponentHost;
  private log: WriteLog | undefined;
  private flusher: Flusher | undefined;
  private http: http.Server | undefined;
  private otlpGrpc: OtlpGrpcServer | undefined;
  private metricsHttp: http.Server | undefined;
  private consoleHttp: http.Server | undefined;
  private deliverer: AlertDeliverer | undefined;
  private admin: AdminServer | undefined;
  private retention: RetentionJob | undefined;
  private diskReporter: DiskReporter | undefined;
  /** The apps of the listeners, for routes(). */
  private readonly apps: Partial<Record<Listener, express.Express>> = {};
  private draining = false;
  /** Set when REDIS_URL is: both Redis clients of the request path answer. */
  private redisPing: (() => Promise<void>) | undefined;
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];
  private shutdownPromise: Promise<void> | undefined;
  /** Set by shutdown: nobody is left to move traffic away during a drain grace. */
  private skipGrace = false;
  private lock: DataDirLock | undefined;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    private readonly parts: ServerParts = {},
  ) {
    this.metrics = parts.metrics ?? new Metrics();
    this.authFailures = new AuthFailures(config.AUTH_FAILURE_LIMIT, this.metrics);
    this.host = new ComponentHost(logger);
  }

  get port(): number {
    return (this.http?.address() as AddressInfo | null)?.port ?? 0;
  }

  /** The /metrics listener's port. */
  get metricsPort(): number {
    return (this.metricsHttp?.address() as AddressInfo | null)?.port ?? 0;
  }

  /** The OTLP/gRPC listener's port; 0 when OTLP_GRPC_PORT is unset. */
  get otlpGrpcPort(): number {
    return this.otlpGrpc?.port ?? 0;
  }

  /** The console listener's port; 0 when CONSOLE_PORT is unset. */
  get consolePort(): number {
    return (this.consoleHttp?.address() as AddressInfo | null)?.port ?? 0;
  }

  /** What every listener serves (method, path), from the apps themselves: the route-by-credential table is checked against it. */
  routes(): { listener: Listener; method: string; path: string }[] {
    return (Object.entries(this.apps) as [Listener, express.Express][]).flatMap(([listener, app]) => routesOf(app).map((r) => ({ listener, ...r })));
  }

  /** Reads the disk gauges of /metrics now rather than at the next minute. */
  async refreshDiskGauges(): Promise<void> {
    await this.diskReporter?.refresh();
  }

  get writeLog(): WriteLog | undefined {
    return this.log;
  }

  /**
   * Registers every part with the host in start order (shutdown closes them
   * in reverse) and starts them; a part that fails to start closes those
   * started before it, so a failed start leaves nothing open.
   */
  async start(): Promise<void> {
    const c = this.config;
    const host = this.host;
    let control: ControlDriver;
    let keyStore: ControlStore;
    let spanStore: SpanStore;
    let limiter: RateLimiter;
    let quota: ReconcilingQuota;
    let log: WriteLog;
    let pricing: Pricing;
    let budgets: Budgets;
    let watcher: BudgetWatcher;
    let flusher: Flusher;
    const orgName = async (id: string) => (await keyStore.getOrg(id))?.name;

    host.add({
      name: 'DATA_DIR lock',
      start: () => {
        checkDataDir(c.dataDir);
        // Before any file in DATA_DIR is opened: a second server there would replay and retire this one's write log.
        this.lock = DataDirLock.acquire(c.dataDir);
        if (this.lock.previous !== undefined && this.lock.previous.pid !== process.pid)
          this.logger.warn(
            { previousPid: this.lock.previous.pid, startedAt: this.lock.previous.startedAt },
            'the previous server of this DATA_DIR did not shut down cleanly',
          );
      },
      // Closed last: DATA_DIR is free for the next server only once every file in it is closed.
      close: () => this.lock?.release(),
    });
    host.add({ name: 'DATA_DIR mode', start: () => this.privateDataDir() });
    host.add({
      // One connection (pool) for every table the server keeps there: keys, usage, budgets, console tokens.
      name: 'control database',
      start: async () => {
        control = await openControlDriver(controlDriverOptions(c));
        await control.open();
      },
      close: () => control.close(),
    });
    host.add({
      name: 'key store',
      start: async () => {
        keyStore = this.parts.keyStore ?? new SqlControlStore(sharedControlDriver(control));
        await keyStore.start();
      },
      close: () => keyStore.close(),
    });
    host.add({ name: 'initial org and key', start: () => this.initFromEnv(keyStore) });
    host.add({
      name: 'span store',
      start: async () => {
        spanStore = this.parts.spanStore ?? (await createSpanStore(this.spanStoreOptions()));
        await spanStore.start();
        // Derived tables are derived by one replica of those sharing PostgreSQL at a time.
        spanStore.startBackground?.(this.lease('derive'));
      },
      close: () => spanStore.close(),
    });
    host.add({
      // Known before the write log is replayed: ClickHouse rows carry their org's retention. Its passes start with the other jobs.
      name: 'org retention',
      start: async () => {
        this.retention = new RetentionJob(keyStore, spanStore, this.metrics, this.logger, {
          defaults: { days: c.RETENTION_DAYS, textDays: c.TEXT_RETENTION_DAYS },
          intervalMs: c.RETENTION_INTERVAL_MS,
          // Replicas on one PostgreSQL run one retention pass at a time between them.
          lease: this.lease('retention'),
        });
        await this.retention.refreshKnown();
      },
    });
    host.add({
      name: 'quota and rate limiter',
      start: async () => {
        ({ limiter, quota } = await this.limits(keyStore));
        try {
          await quota.start();
        } catch (e) {
          await this.closeLimits(limiter, quota);
          throw e;
        }
      },
      close: () => this.closeLimits(limiter, quota),
    });
    host.add({
      name: 'write log',
      start: async () => {
        log = this.log = new WriteLog({ dir: c.walDir, durability: c.INGEST_DURABILITY, maxBytes: c.BUFFER_MAX_BYTES });
        await log.start();
        const replay = log.pendingSegments();
        if (replay.length > 0) this.logger.info({ segments: replay.length, bytes: log.bytes }, 'replaying write log segments left by the previous run');
      },
      close: () => log.close(),
    });
    host.add({
      name: 'prices',
      start: async () => {
        pricing = this.parts.pricing ?? (await createPricing(keyStore, { catalogFile: c.PRICE_CATALOG_FILE }));
        fastValidator();
      },
    });
    host.add({
      name: 'budgets',
      start: async () => {
        budgets = new Budgets(sharedControlDriver(control), secretBoxFor(c));
        await budgets.start();
        // Secrets stored in plain text by an earlier version (or under an older key) are sealed now.
        await budgets.sealSecrets().then(
          (n) => n > 0 && this.logger.info({ secrets: n }, 'sealed webhook secrets stored in plain text or under an older key'),
          (e: unknown) => this.logger.warn({ err: e }, 'webhook secrets could not be sealed; alerts are still signed (see SECRETS_KEY_FILE)'),
        );
      },
      close: () => budgets.close(),
    });
    host.add({
      name: 'budget watcher',
      start: () => {
        watcher = new BudgetWatcher(budgets, spanStore, this.metrics, this.logger, {
          checkMs: c.BUDGET_CHECK_MS,
          orgName,
          customerLabels: c.METRICS_CUSTOMER_LABELS,
          anomaly: { factor: BigInt(c.ANOMALY_FACTOR), minUsd: parseDecimal(c.ANOMALY_MIN_USD) },
          ...(this.parts.now === undefined ? {} : { now: this.parts.now }),
          // Replicas on one PostgreSQL record alerts from one budget check at a time.
          lease: this.lease('budgets'),
        });
        watcher.onAlerts = () => this.deliverer?.poke();
        watcher.start();
      },
      // Closed after the flusher: the last flush's spend is checked, and a crossed threshold recorded for the next start to deliver.
      close: async () => {
        await watcher.checkNow().catch((e: unknown) => this.logger.warn({ err: e }, 'last budget check failed'));
        await watcher.close();
      },
    });
    host.add({
      name: 'flusher',
      start: () => {
        flusher = this.flusher = new Flusher(
          log,
          spanStore,
          {
            intervalMs: c.FLUSH_INTERVAL_MS,
            maxRows: c.FLUSH_MAX_ROWS,
            maxBytes: c.FLUSH_MAX_BYTES,
            backlogMaxRows: c.FLUSH_BACKLOG_MAX_ROWS,
            backlogMaxBytes: c.FLUSH_BACKLOG_MAX_BYTES,
            gatherMs: c.FLUSH_GATHER_MS,
            gatherMinRate: c.FLUSH_GATHER_MIN_RATE,
            timeoutMs: c.FLUSH_TIMEOUT_MS,
            deadLetterDir: path.join(c.dataDir, 'dead-letter'),
            onStored: () => watcher.poke(),
          },
          this.logger,
          this.metrics,
        );
        flusher.start();
      },
      // The last flush, bounded: what is left stays in the write log for the next start.
      close: () => flusher.close(c.DRAIN_TIMEOUT_MS),
    });
    host.add({
      name: 'alert deliverer',
      start: () => {
        this.deliverer = new AlertDeliverer(budgets, this.metrics, this.logger, { timeoutMs: c.WEBHOOK_TIMEOUT_MS, orgName });
        this.deliverer.start();
      },
      close: () => this.deliverer?.close(),
    });
    host.add({
      name: 'disk reporter',
      start: () => {
        this.diskReporter = new DiskReporter(spanStore, () => this.log?.bytes ?? 0, this.metrics, this.logger);
        this.diskReporter.start();
      },
      close: () => this.diskReporter?.close(),
    });
    host.add({ name: 'retention', start: () => this.retention?.start(), close: () => this.retention?.close() });
    host.add({
      name: 'admin socket',
      start: () => this.startAdmin(spanStore, pricing, keyStore, watcher),
      close: () => this.admin?.close(),
    });
    const consolePort = c.CONSOLE_PORT;
    if (consolePort !== undefined) {
      let tokens: ConsoleTokens;
      host.add({
        name: 'console tokens',
        start: async () => {
          tokens = new ConsoleTokens(sharedControlDriver(control));
          await tokens.start();
        },
        close: () => tokens.close(),
      });
      host.add({
        // Its own listener, so nothing new is reachable on the ingest port.
        name: 'console listener',
        start: () => this.listenConsole(consolePort, { tokens, keyStore, spanStore, pricing, watcher }),
        close: () => closeListener(this.consoleHttp),
      });
    }
    host.add({ name: 'metrics listener', start: () => this.listenMetrics(), close: () => closeListener(this.metricsHttp) });
    host.add({
      name: 'ingest listeners',
      start: () => this.listenIngest({ keyStore, spanStore, limiter, quota, pricing, log, flusher, watcher }),
      // First to close: the drain.
      close: () => this.drain(),
    });
    host.add({
      name: 'first-run hint',
      start: async () => {
        if ((await keyStore.listKeys()).length === 0)
          this.logger.info(
            'no API keys yet: create one with "npx trace-ingest orgs create <org>" then ' +
              `"npx trace-ingest keys create --org <org>" (same DATA_DIR=${c.dataDir})`,
          );
      },
    });
    await host.start();
  }

  /** The span store's options, picked by the configuration. */
  private spanStoreOptions(): StoreOptions {
    const c = this.config;
    return {
      sqliteFile: c.sqliteFile,
      duckdbFile: c.duckdbFile,
      clickhouseUrl: c.CLICKHOUSE_URL,
      requestTimeoutMs: c.FLUSH_TIMEOUT_MS,
      duckdbThreads: c.DUCKDB_THREADS,
      duckdbMemoryLimit: c.DUCKDB_MEMORY_LIMIT ?? SERVER_DUCKDB_MEMORY,
      duckdbBlockAllocatorMemory: blockAllocatorMemory(c.DUCKDB_BLOCK_ALLOCATOR_MEMORY ?? SERVER_DUCKDB_BLOCK_ALLOCATOR),
      logger: this.logger,
      retentionOf: (orgId: string) => this.retention?.retentionOf(orgId),
    };
  }

  /** A job's lease among the replicas sharing PostgreSQL; none (in-process) without DATABASE_URL. */
  private lease(job: string): PgAdvisoryLease | undefined {
    const c = this.config;
    return c.DATABASE_URL === undefined ? undefined : new PgAdvisoryLease(c.DATABASE_URL, leaseName(job, c.DATABASE_URL, c.CLICKHOUSE_URL));
  }

  /** Redis when REDIS_URL is set (shared by every replica; fails closed, 503, while unreachable), else in-process. */
  private async limits(keyStore: ControlStore): Promise<{ limiter: RateLimiter; quota: ReconcilingQuota }> {
    const c = this.config;
    if (c.REDIS_URL === undefined)
      return { limiter: this.parts.limiter ?? new MemoryRateLimiter(), quota: this.reconciling(this.parts.quota ?? new StoreQuotaCounter(keyStore)) };
    const { RedisQuotaCounter, RedisRateLimiter } = await import('./redis-limits.js');
    const onRedisError = (e: unknown) => this.logger.warn({ err: e }, 'redis error');
    const limiter = new RedisRateLimiter(c.REDIS_URL, { keyPrefix: c.REDIS_KEY_PREFIX });
    const quota = new RedisQuotaCounter(c.REDIS_URL, keyStore, { keyPrefix: c.REDIS_KEY_PREFIX, onRedisError });
    this.redisPing = async () => {
      await Promise.all([limiter.ping(), quota.ping()]);
    };
    // Connect before listening, so the first requests are not refused while the client connects.
    await Promise.all([limiter.ready(5000), quota.ready(5000)]).catch((e: unknown) =>
      this.logger.warn({ err: e }, 'redis is not reachable yet; requests get 503 until it is'),
    );
    return { limiter, quota: this.reconciling(quota) };
  }

  /** The limiter first, then the quota: its last attempt writes what is still owed for the next start. */
  private async closeLimits(limiter: RateLimiter, quota: ReconcilingQuota): Promise<void> {
    await limiter.close();
    await quota.close();
  }

  /** The admin socket; without it reports fall back to opening the store directly, so ingest does not depend on it. */
  private async startAdmin(spanStore: SpanStore, pricing: Pricing, keyStore: ControlStore, watcher: BudgetWatcher): Promise<void> {
    const c = this.config;
    const admin = new AdminServer(
      c.adminSocket,
      spanStore,
      pricing,
      this.logger,
      this.metrics,
      () => this.port,
      () => (this.consoleHttp === undefined ? undefined : `http://${c.CONSOLE_HOST === '0.0.0.0' ? '127.0.0.1' : c.CONSOLE_HOST}:${this.consolePort}/console/`),
      { audit: keyStore, onErased: (orgId, _kind, id) => watcher.forgetCustomer(orgId, id) },
    );
    this.apps.admin = admin.app();
    try {
      await admin.start();
      this.admin = admin;
    } catch (e) {
      this.logger.warn({ err: e, socket: c.adminSocket }, 'admin socket unavailable');
    }
  }

  private async listenConsole(
    port: number,
    p: { tokens: ConsoleTokens; keyStore: ControlStore; spanStore: SpanStore; pricing: Pricing; watcher: BudgetWatcher },
  ): Promise<void> {
    const c = this.config;
    const consoleApp = createConsoleApp({
      tokens: p.tokens,
      keys: p.keyStore,
      spans: p.spanStore,
      prices: p.pricing,
      logger: this.logger,
      metrics: this.metrics,
      budgets: (orgId) => p.watcher.forConsole(orgId),
      allowedHosts: consoleHosts(c.CONSOLE_HOST, c.CONSOLE_ALLOWED_HOSTS),
      failures: this.authFailures,
      trustProxy: c.TRUST_PROXY ?? false,
      ...(this.parts.now === undefined ? {} : { now: this.parts.now }),
    });
    this.apps.console = consoleApp;
    this.consoleHttp = http.createServer({ headersTimeout: c.HEADERS_TIMEOUT_MS, requestTimeout: c.REQUEST_TIMEOUT_MS }, consoleApp);
    this.consoleHttp.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket));
    await listen(this.consoleHttp, port, c.CONSOLE_HOST, 'CONSOLE_PORT');
    this.logger.info({ port: this.consolePort, host: c.CONSOLE_HOST }, 'cost console listening at /console/ (token: "trace-ingest console token create")');
    if (!isLoopback(c.CONSOLE_HOST))
      this.logger.warn(
        { host: c.CONSOLE_HOST, allowedHosts: consoleHosts(c.CONSOLE_HOST, c.CONSOLE_ALLOWED_HOSTS) },
        `the cost console listens on ${c.CONSOLE_HOST} over plain HTTP (no TLS): tokens and spend cross the network in clear; ` +
          'put a TLS proxy in front and name it in CONSOLE_ALLOWED_HOSTS, or keep CONSOLE_HOST on loopback',
      );
  }

  /** Never on the ingest port: the metrics name orgs and models (and customers, when allowed). */
  private async listenMetrics(): Promise<void> {
    const c = this.config;
    const metricsApp = createMetricsApp({
      metrics: this.metrics,
      logger: this.logger,
      token: c.metricsToken,
      failures: this.authFailures,
      trustProxy: c.TRUST_PROXY ?? false,
    });
    this.apps.metrics = metricsApp;
    this.metricsHttp = http.createServer({ headersTimeout: c.HEADERS_TIMEOUT_MS, requestTimeout: c.REQUEST_TIMEOUT_MS }, metricsApp);
    this.metricsHttp.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket));
    await listen(this.metricsHttp, c.METRICS_PORT, c.METRICS_HOST, 'METRICS_PORT');
    this.logger.info({ port: this.metricsPort, host: c.METRICS_HOST, token: c.metricsToken !== undefined }, 'metrics listening at /metrics');
  }

  /**
   * The ingest listeners: HTTP, and OTLP/gRPC when configured. One set of parts for every ingest transport: the HTTP
   * routes and OTLP/gRPC share slots, limits and the write log.
   */
  private async listenIngest(p: {
    keyStore: ControlStore;
    spanStore: SpanStore;
    limiter: RateLimiter;
    quota: ReconcilingQuota;
    pricing: Pricing;
    log: WriteLog;
    flusher: Flusher;
    watcher: BudgetWatcher;
  }): Promise<void> {
    const c = this.config;
    const { keyStore, spanStore, log, flusher } = p;
    const disk = new DiskSpace(c.dataDir, c.DISK_RESERVE_BYTES);
    // Ready means batches are being stored, not that a handle answers: the flusher's last insert and flush, the
    // write log's last write, the store's file and the log's fill all count; each dependency in parallel, bounded.
    const readiness = new Readiness(
      {
        'control store': () => keyStore.ping(),
        'span store': () => spanStore.ping(),
        ...(this.redisPing === undefined ? {} : { redis: this.redisPing }),
        'write log': () => {
          const problem = log.writeProblem ?? flusher.storeProblem() ?? flusher.flushProblem() ?? disk.problem();
          if (problem !== undefined) throw new Error(problem);
          // Not ready a little before the cap, so a load balancer moves traffic before batches get 503.
          if (log.bytes >= log.maxBytes * 0.9)
            throw new Error(`write log is ${Math.round((100 * log.bytes) / log.maxBytes)}% full while the span store catches up`);
        },
        // Handles for the flusher's next segments and new connections: with none left every flush fails.
        'file handles': () => checkFileHandles(c.walDir),
        ...(c.OTLP_GRPC_PORT === undefined ? {} : { 'otlp grpc': async () => this.otlpGrpc?.check() }),
      },
      c.READY_CHECK_TIMEOUT_MS,
    );
    const deps: AppDeps = {
      maxBodyBytes: c.INGEST_MAX_BODY_BYTES,
      minBodyBytesPerSec: c.BODY_MIN_BYTES_PER_SEC,
      auth: new Authenticator(keyStore, this.authFailures),
      limiter: p.limiter,
      quota: p.quota,
      pricing: p.pricing,
      log,
      flusher,
      slots: new BodySlots(c.MAX_CONCURRENT_BODIES, (held, waiting) => {
        this.metrics.bodySlotsHeld.set(held);
        this.metrics.bodySlotsWaiting.set(waiting);
      }),
      inflateSlots: new BodySlots(c.MAX_CONCURRENT_BODIES),
      metrics: this.metrics,
      logger: this.logger,
      isDraining: () => this.draining,
      otlp: { codec: new OtlpCodec(), mapping: { customerAttributes: c.OTLP_CUSTOMER_ATTRIBUTES, sessionAttributes: c.OTLP_SESSION_ATTRIBUTES } },
      trustProxy: c.TRUST_PROXY ?? false,
      checkReady: () => readiness.check(),
      refusal: () => spanStore.problem?.() ?? disk.problem(),
      textRetentionDays: c.TEXT_RETENTION_DAYS,
      budget: (orgId, customer) => p.watcher.answer(orgId, customer),
    };
    const app = createApp(deps);
    this.apps.ingest = app;
    // Node enforces the timeouts only on this tick (30 s by default): check often enough to cut a slow client off on time.
    const checkEvery = Math.max(100, Math.min(1000, Math.floor(Math.min(c.HEADERS_TIMEOUT_MS, c.REQUEST_TIMEOUT_MS) / 2)));
    const server = http.createServer(
      { headersTimeout: c.HEADERS_TIMEOUT_MS, requestTimeout: c.REQUEST_TIMEOUT_MS, connectionsCheckingInterval: checkEvery },
      (req, res) => {
        this.inFlight++;
        res.once('close', () => {
          this.inFlight--;
          if (this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
        });
        app(req, res);
      },
    );
    server.keepAliveTimeout = 65_000;
    server.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket));
    this.http = server;
    await listen(server, c.PORT, c.HOST);
    if (c.OTLP_GRPC_PORT !== undefined) {
      this.otlpGrpc = new OtlpGrpcServer(deps, {
        port: c.OTLP_GRPC_PORT,
        host: c.HOST,
        maxStreams: c.OTLP_GRPC_MAX_STREAMS,
        receiveTimeoutMs: c.REQUEST_TIMEOUT_MS,
        trustProxy: c.TRUST_PROXY ?? false,
      });
      try {
        await this.otlpGrpc.start();
      } catch (e) {
        // This part did not start, so the host will not close it: the HTTP listener is closed here.
        await this.closeListeners();
        throw e;
      }
      this.logger.info({ port: this.otlpGrpcPort, host: c.HOST }, 'OTLP/gRPC listening (TraceService/Export)');
    }
    this.logger.info(
      { port: this.port, host: c.HOST, spanStore: spanStore.kind, keyStore: keyStore.kind, durability: c.INGEST_DURABILITY },
      'trace-ingest listening',
    );
  }

  /** DATA_DIR made 0700; one that other users can enter or read is said in the log (doctor says how to close it). */
  private privateDataDir(): void {
    const dir = this.config.dataDir;
    ensurePrivateDir(dir);
    const mode = fs.statSync(dir).mode;
    if (openToOthers(mode) !== 0)
      this.logger.warn(
        { dataDir: dir, mode: modeText(mode) },
        `DATA_DIR is open to other users (${modeText(mode)}): it holds prompts, keys' hashes and webhook secrets; run "chmod 700 ${dir}"`,
      );
  }

  /** Once a batch is in the write log its answer is 202: a failing quota store is caught up later. */
  private reconciling(quota: QuotaCounter): ReconcilingQuota {
    return new ReconcilingQuota(quota, {
      pendingFile: path.join(this.config.dataDir, 'quota-owed.json'),
      logger: this.logger,
      metrics: this.metrics,
      countWaitMs: this.config.QUOTA_COUNT_WAIT_MS,
    });
  }

  /**
   * Headless install: TRACE_INGEST_INIT_ORG / TRACE_INGEST_INIT_API_KEY create the org and key when absent;
   * a key without an org goes to the org named `default`.
   */
  private async initFromEnv(keys: ControlStore): Promise<void> {
    const key = this.config.TRACE_INGEST_INIT_API_KEY;
    const org = this.config.TRACE_INGEST_INIT_ORG ?? (key === undefined ? undefined : DEFAULT_INIT_ORG);
    if (org === undefined) return;
    if ((await keys.getOrg(org)) === null) {
      await keys.createOrg({ name: org });
      this.logger.info({ org }, 'created the initial org');
    }
    if (key !== undefined && !(await keys.hasKeyHash(hashApiKey(key)))) {
      const created = await keys.createKey({ orgName: org, name: 'initial', key });
      this.logger.info({ org, prefix: created.prefix }, 'created the initial API key');
    }
  }

  /** Flushes the write log into the span store now (tests, admin). */
  async flush(): Promise<void> {
    await this.flusher?.flushNow();
  }

  /** Drains and closes; `skipGrace` when nobody is left to move traffic away first (the parent process died). */
  shutdown(opts: { skipGrace?: boolean } = {}): Promise<void> {
    this.shutdownPromise ??= this.doShutdown(opts.skipGrace ?? false);
    return this.shutdownPromise;
  }

  private async closeHttp(): Promise<void> {
    const server = this.http;
    if (server?.listening !== true) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    if (this.inFlight > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    server.closeAllConnections();
    await closed;
  }
  /** Both ingest listeners stop together, each letting its requests in flight finish. */
  private async closeListeners(): Promise<void> {
    await Promise.all([this.closeHttp(), this.otlpGrpc?.close(this.config.DRAIN_TIMEOUT_MS)]);
  }

  /** Stops accepting: new batches get 503 (gRPC UNAVAILABLE) for the drain grace, then the listeners close. */
  private async drain(): Promise<void> {
    const c = this.config;
    if (this.http?.listening === true) {
      this.logger.info({ graceMs: c.DRAIN_GRACE_MS }, 'draining: new batches get 503 (OTLP/gRPC: UNAVAILABLE)');
      if (!this.skipGrace) await sleep(c.DRAIN_GRACE_MS);
    }
    await this.closeListeners();
  }

  /** The host closes the parts in reverse: the drain, the other listeners, the jobs, the last flush, the stores, the DATA_DIR lock. */
  private async doShutdown(skipGrace: boolean): Promise<void> {
    this.skipGrace = skipGrace;
    this.draining = true;
    // A start that failed has already closed what it opened: there is nothing to drain.
    const listening = this.http?.listening === true;
    await this.host.close();
    if (listening) this.logger.info('shutdown complete');
    else this.logger.debug('closed without having accepted anything');
  }
}

/** Stops a listener with nothing to drain (metrics, console) and ends its connections. */
function closeListener(server: http.Server | undefined): Promise<void> {
  if (server === undefined) return Promise.resolve();
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
