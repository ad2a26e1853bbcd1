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
import { openBudgets, type Budgets } from '@trace-ingest/store/budgets';
import { secretBoxFor } from '@trace-ingest/store/secret-box';
import { parseDecimal } from '@trace-ingest/shared/decimal';
import { openConsoleTokens, type ConsoleTokens, type ControlDriverOptions } from '@trace-ingest/store/console-tokens';
import type { PostgresTimeouts } from '@trace-ingest/store/control-store-postgres';
import { createControlStore, createSpanStore } from '@trace-ingest/store/open-stores';
import { DataDirLock } from '@trace-ingest/store/data-dir-lock';
import { leaseName, PgAdvisoryLease } from '@trace-ingest/store/pg-lease';
import { createPricing, type Pricing } from '@trace-ingest/store/pricing';
import type { SpanStore } from '@trace-ingest/store/span-store';
import { AdminServer } from './admin.js';
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
 * One ingest process: stores, write log, flusher, the HTTP listener and, when
 * configured, the OTLP/gRPC one. Shutdown order: stop accepting (503, gRPC
 * UNAVAILABLE, for the drain grace), let in-flight requests finish, close the
 * listeners, flush, close the stores.
 */
/**
 * DuckDB's own default is 80% of RAM, which it fills with cached blocks and keeps:
 * reports read the rollups, so a fixed share is enough (a 10M-row store ran its
 * reports and reprice in it; see bench/README.md, growth).
 */
const SERVER_DUCKDB_MEMORY = '1GiB';

/** The server's bounds on a PostgreSQL call, from the config. */
function postgresTimeouts(c: Config): PostgresTimeouts {
  return {
    statementMs: c.DATABASE_STATEMENT_TIMEOUT_MS,
    lockMs: c.DATABASE_LOCK_TIMEOUT_MS,
    idleInTransactionMs: c.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    queryMs: c.DATABASE_QUERY_TIMEOUT_MS,
  };
}

/** The server's connections to the control store's database: SQLite never waits for a lock on the event loop. */
function controlDriverOptions(c: Config): ControlDriverOptions {
  return { sqliteFile: c.sqliteFile, databaseUrl: c.DATABASE_URL, sqliteBusyTimeoutMs: 0, postgresTimeouts: postgresTimeouts(c) };
}

/** The org of TRACE_INGEST_INIT_API_KEY when TRACE_INGEST_INIT_ORG is unset. */
export const DEFAULT_INIT_ORG = 'default';

export class IngestServer {
  readonly metrics: Metrics;
  /** Failed authentications per client address, shared by every listener. */
  readonly authFailures: AuthFailures;
  private keyStore: ControlStore | undefined;
  private spanStore: SpanStore | undefined;
  private limiter: RateLimiter | undefined;
  private quota: ReconcilingQuota | undefined;
  private log: WriteLog | undefined;
  private flusher: Flusher | undefined;
  private http: http.Server | undefined;
  private otlpGrpc: OtlpGrpcServer | undefined;
  private metricsHttp: http.Server | undefined;
  private consoleHttp: http.Server | undefined;
  private consoleTokens: ConsoleTokens | undefined;
  private budgets: Budgets | undefined;
  private budgetWatcher: BudgetWatcher | undefined;
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
  private lock: DataDirLock | undefined;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    private readonly parts: ServerParts = {},
  ) {
    this.metrics = parts.metrics ?? new Metrics();
    this.authFailures = new AuthFailures(config.AUTH_FAILURE_LIMIT, this.metrics);
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

  async start(): Promise<void> {
    const c = this.config;
    checkDataDir(c.dataDir);
    // Before any file in DATA_DIR is opened: a second server there would replay and retire this one's write log.
    this.lock = DataDirLock.acquire(c.dataDir);
    if (this.lock.previous !== undefined && this.lock.previous.pid !== process.pid)
      this.logger.warn(
        { previousPid: this.lock.previous.pid, startedAt: this.lock.previous.startedAt },
        'the previous server of this DATA_DIR did not shut down cleanly',
      );
    this.privateDataDir();
    const storeOpts = {
      sqliteFile: c.sqliteFile,
      duckdbFile: c.duckdbFile,
      databaseUrl: c.DATABASE_URL,
      clickhouseUrl: c.CLICKHOUSE_URL,
      requestTimeoutMs: c.FLUSH_TIMEOUT_MS,
      duckdbThreads: c.DUCKDB_THREADS,
      duckdbMemoryLimit: c.DUCKDB_MEMORY_LIMIT ?? SERVER_DUCKDB_MEMORY,
      // No synchronous wait on the request path: a locked file fails fast and the quota reconciler retries.
      sqliteBusyTimeoutMs: 0,
      postgresTimeouts: postgresTimeouts(c),
      logger: this.logger,
      retentionOf: (orgId: string) => this.retention?.retentionOf(orgId),
    };
    const keyStore = this.parts.keyStore ?? (await createControlStore(storeOpts));
    this.keyStore = keyStore;
    await keyStore.start();
    await this.initFromEnv(keyStore);
    const spanStore = this.parts.spanStore ?? (await createSpanStore(storeOpts));
    this.spanStore = spanStore;
    await spanStore.start();
    // Derived tables are derived by one replica of those sharing PostgreSQL at a time.
    spanStore.startBackground?.(
      c.DATABASE_URL === undefined ? undefined : new PgAdvisoryLease(c.DATABASE_URL, leaseName('derive', c.DATABASE_URL, c.CLICKHOUSE_URL)),
    );
    this.retention = new RetentionJob(keyStore, spanStore, this.metrics, this.logger, {
      defaults: { days: c.RETENTION_DAYS, textDays: c.TEXT_RETENTION_DAYS },
      intervalMs: c.RETENTION_INTERVAL_MS,
      // Replicas on one PostgreSQL run one retention pass at a time between them.
      lease: c.DATABASE_URL === undefined ? undefined : new PgAdvisoryLease(c.DATABASE_URL, leaseName('retention', c.DATABASE_URL, c.CLICKHOUSE_URL)),
    });
    // Known before the write log is replayed: ClickHouse rows carry their org's retention.
    await this.retention.refreshKnown();

    this.log = new WriteLog({ dir: c.walDir, durability: c.INGEST_DURABILITY, maxBytes: c.BUFFER_MAX_BYTES });
    await this.log.start();
    const replay = this.log.pendingSegments();
    if (replay.length > 0) this.logger.info({ segments: replay.length, bytes: this.log.bytes }, 'replaying write log segments left by the previous run');
    this.flusher = new Flusher(
      this.log,
      spanStore,
      {
        intervalMs: c.FLUSH_INTERVAL_MS,
        maxRows: c.FLUSH_MAX_ROWS,
        maxBytes: c.FLUSH_MAX_BYTES,
        timeoutMs: c.FLUSH_TIMEOUT_MS,
        deadLetterDir: path.join(c.dataDir, 'dead-letter'),
        onStored: () => this.budgetWatcher?.poke(),
      },
      this.logger,
      this.metrics,
    );
    this.flusher.start();

    if (c.REDIS_URL !== undefined) {
      // Shared by every replica; fails closed (503) while Redis is unreachable.
      const { RedisQuotaCounter, RedisRateLimiter } = await import('./redis-limits.js');
      const onRedisError = (e: unknown) => this.logger.warn({ err: e }, 'redis error');
      const limiter = new RedisRateLimiter(c.REDIS_URL, { keyPrefix: c.REDIS_KEY_PREFIX });
      const quota = new RedisQuotaCounter(c.REDIS_URL, keyStore, { keyPrefix: c.REDIS_KEY_PREFIX, onRedisError });
      this.limiter = limiter;
      this.quota = this.reconciling(quota);
      this.redisPing = async () => {
        await Promise.all([limiter.ping(), quota.ping()]);
      };
      // Connect before listening, so the first requests are not refused while the client connects.
      await Promise.all([limiter.ready(5000), quota.ready(5000)]).catch((e: unknown) =>
        this.logger.warn({ err: e }, 'redis is not reachable yet; requests get 503 until it is'),
      );
    } else {
      this.limiter = this.parts.limiter ?? new MemoryRateLimiter();
      this.quota = this.reconciling(this.parts.quota ?? new StoreQuotaCounter(keyStore));
    }
    await this.quota.start();
    const pricing = this.parts.pricing ?? (await createPricing(keyStore, { catalogFile: c.PRICE_CATALOG_FILE }));
    fastValidator();

    // The same bounds as the control store's own connection: none of the server's connections waits on the event loop.
    const budgets = await openBudgets({ ...controlDriverOptions(c), secrets: secretBoxFor(c) });
    this.budgets = budgets;
    await budgets.start();
    // Secrets stored in plain text by an earlier version (or under an older key) are sealed now.
    await budgets.sealSecrets().then(
      (n) => n > 0 && this.logger.info({ secrets: n }, 'sealed webhook secrets stored in plain text or under an older key'),
      (e: unknown) => this.logger.warn({ err: e }, 'webhook secrets could not be sealed; alerts are still signed (see SECRETS_KEY_FILE)'),
    );
    const orgName = async (id: string) => (await keyStore.getOrg(id))?.name;
    const watcher = new BudgetWatcher(budgets, spanStore, this.metrics, this.logger, {
      checkMs: c.BUDGET_CHECK_MS,
      orgName,
      customerLabels: c.METRICS_CUSTOMER_LABELS,
      anomaly: { factor: BigInt(c.ANOMALY_FACTOR), minUsd: parseDecimal(c.ANOMALY_MIN_USD) },
      ...(this.parts.now === undefined ? {} : { now: this.parts.now }),
      // Replicas on one PostgreSQL record alerts from one budget check at a time.
      lease: c.DATABASE_URL === undefined ? undefined : new PgAdvisoryLease(c.DATABASE_URL, leaseName('budgets', c.DATABASE_URL, c.CLICKHOUSE_URL)),
    });
    const deliverer = new AlertDeliverer(budgets, this.metrics, this.logger, { timeoutMs: c.WEBHOOK_TIMEOUT_MS, orgName });
    watcher.onAlerts = () => deliverer.poke();
    this.budgetWatcher = watcher;
    this.deliverer = deliverer;
    watcher.start();
    deliverer.start();

    this.retention.start();
    this.diskReporter = new DiskReporter(spanStore, () => this.log?.bytes ?? 0, this.metrics, this.logger);
    this.diskReporter.start();

    const disk = new DiskSpace(c.dataDir, c.DISK_RESERVE_BYTES);
    // Ready means batches are being stored, not that a handle answers: the flusher's last insert and flush, the
    // write log's last write, the store's file and the log's fill all count; each dependency in parallel, bounded.
    const readiness = new Readiness(
      {
        'control store': () => keyStore.ping(),
        'span store': () => spanStore.ping(),
        ...(this.redisPing === undefined ? {} : { redis: this.redisPing }),
        'write log': () => {
          const problem = this.log?.writeProblem ?? this.flusher?.storeProblem() ?? this.flusher?.flushProblem() ?? disk.problem();
          if (problem !== undefined) throw new Error(problem);
          const log = this.log;
          // Not ready a little before the cap, so a load balancer moves traffic before batches get 503.
          if (log !== undefined && log.bytes >= log.maxBytes * 0.9)
            throw new Error(`write log is ${Math.round((100 * log.bytes) / log.maxBytes)}% full while the span store catches up`);
        },
        // Handles for the flusher's next segments and new connections: with none left every flush fails.
        'file handles': () => checkFileHandles(c.walDir),
        ...(c.OTLP_GRPC_PORT === undefined ? {} : { 'otlp grpc': async () => this.otlpGrpc?.check() }),
      },
      c.READY_CHECK_TIMEOUT_MS,
    );
    // One set of parts for every ingest transport: the HTTP routes and OTLP/gRPC share slots, limits and the write log.
    const deps: AppDeps = {
      maxBodyBytes: c.INGEST_MAX_BODY_BYTES,
      minBodyBytesPerSec: c.BODY_MIN_BYTES_PER_SEC,
      auth: new Authenticator(keyStore, this.authFailures),
      limiter: this.limiter,
      quota: this.quota,
      pricing,
      log: this.log,
      flusher: this.flusher,
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
      // Ready means batches are being stored, not that a handle answers: the flusher's last insert, the
      // write log's last write, the store's file and the log's fill all count.
      checkReady: () => readiness.check(),
      refusal: () => spanStore.problem?.() ?? disk.problem(),
      textRetentionDays: c.TEXT_RETENTION_DAYS,
      budget: (orgId, customer) => watcher.answer(orgId, customer),
    };
    const app = createApp(deps);
    this.apps.ingest = app;
    // Never on the ingest port: the metrics name orgs and models (and customers, when allowed).
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
    if (c.CONSOLE_PORT !== undefined) {
      // Its own listener, so nothing new is reachable on the ingest port.
      const tokens = await openConsoleTokens(controlDriverOptions(c));
      this.consoleTokens = tokens;
      await tokens.start();
      const consoleApp = createConsoleApp({
        tokens,
        keys: keyStore,
        spans: spanStore,
        prices: pricing,
        logger: this.logger,
        metrics: this.metrics,
        budgets: (orgId) => watcher.forConsole(orgId),
        allowedHosts: consoleHosts(c.CONSOLE_HOST, c.CONSOLE_ALLOWED_HOSTS),
        failures: this.authFailures,
        trustProxy: c.TRUST_PROXY ?? false,
        ...(this.parts.now === undefined ? {} : { now: this.parts.now }),
      });
      this.apps.console = consoleApp;
      this.consoleHttp = http.createServer({ headersTimeout: c.HEADERS_TIMEOUT_MS, requestTimeout: c.REQUEST_TIMEOUT_MS }, consoleApp);
      this.consoleHttp.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket));
      await listen(this.consoleHttp, c.CONSOLE_PORT, c.CONSOLE_HOST, 'CONSOLE_PORT');
      this.logger.info({ port: this.consolePort, host: c.CONSOLE_HOST }, 'cost console listening at /console/ (token: "trace-ingest console token create")');
      if (!isLoopback(c.CONSOLE_HOST))
        this.logger.warn(
          { host: c.CONSOLE_HOST, allowedHosts: consoleHosts(c.CONSOLE_HOST, c.CONSOLE_ALLOWED_HOSTS) },
          `the cost console listens on ${c.CONSOLE_HOST} over plain HTTP (no TLS): tokens and spend cross the network in clear; ` +
            'put a TLS proxy in front and name it in CONSOLE_ALLOWED_HOSTS, or keep CONSOLE_HOST on loopback',
        );
    }
    this.admin = new AdminServer(
      c.adminSocket,
      spanStore,
      pricing,
      this.logger,
      this.metrics,
      () => this.port,
      () => (this.consoleHttp === undefined ? undefined : `http://${c.CONSOLE_HOST === '0.0.0.0' ? '127.0.0.1' : c.CONSOLE_HOST}:${this.consolePort}/console/`),
      { audit: keyStore, onErased: (orgId, _kind, id) => watcher.forgetCustomer(orgId, id) },
    );
    this.apps.admin = this.admin.app();
    try {
      await this.admin.start();
    } catch (e) {
      // Reports then fall back to opening the store directly; ingest does not depend on it.
      this.logger.warn({ err: e, socket: c.adminSocket }, 'admin socket unavailable');
      this.admin = undefined;
    }
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
      await this.otlpGrpc.start();
      this.logger.info({ port: this.otlpGrpcPort, host: c.HOST }, 'OTLP/gRPC listening (TraceService/Export)');
    }
    this.logger.info(
      { port: this.port, host: c.HOST, spanStore: spanStore.kind, keyStore: keyStore.kind, durability: c.INGEST_DURABILITY },
      'trace-ingest listening',
    );
    if ((await keyStore.listKeys()).length === 0) {
      this.logger.info(
        `no API keys yet: create one with "npx trace-ingest orgs create <org>" then "npx trace-ingest keys create --org <org>" (same DATA_DIR=${c.dataDir})`,
      );
    }
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

  private async doShutdown(skipGrace: boolean): Promise<void> {
    const c = this.config;
    this.draining = true;
    // After a failed start nothing was accepted: there is nothing to drain, only what was opened to close.
    const listening = this.http?.listening === true;
    if (listening) {
      this.logger.info({ graceMs: c.DRAIN_GRACE_MS }, 'draining: new batches get 503 (OTLP/gRPC: UNAVAILABLE)');
      if (!skipGrace) await sleep(c.DRAIN_GRACE_MS);
    }
    // Both listeners stop together, each letting its requests in flight finish.
    await Promise.all([this.closeHttp(), this.otlpGrpc?.close(c.DRAIN_TIMEOUT_MS)]);
    if (this.metricsHttp !== undefined) {
      const m = this.metricsHttp;
      await new Promise<void>((resolve) => {
        m.close(() => resolve());
        m.closeAllConnections();
      });
    }
    if (this.consoleHttp !== undefined) {
      const ch = this.consoleHttp;
      await new Promise<void>((resolve) => {
        ch.close(() => resolve());
        ch.closeAllConnections();
      });
    }
    await this.consoleTokens?.close();
    await this.admin?.close();
    await this.retention?.close();
    await this.diskReporter?.close();
    await this.deliverer?.close();
    await this.flusher?.close(c.DRAIN_TIMEOUT_MS);
    // After the last flush: its spend is checked, and a crossed threshold recorded for the next start to deliver.
    await this.budgetWatcher?.checkNow().catch((e: unknown) => this.logger.warn({ err: e }, 'last budget check failed'));
    await this.budgetWatcher?.close();
    await this.budgets?.close();
    await this.log?.close();
    await this.limiter?.close();
    await this.quota?.close();
    await this.spanStore?.close();
    await this.keyStore?.close();
    // Last: DATA_DIR is free for the next server only once every file in it is closed.
    this.lock?.release();
    if (listening) this.logger.info('shutdown complete');
    else this.logger.debug('closed what a failed start had opened');
  }
}
