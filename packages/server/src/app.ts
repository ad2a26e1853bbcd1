import express, { type NextFunction, type Request, type Response } from 'express';
import { NotReadyError } from './readiness.js';
import type { Logger } from 'pino';
import { BadRequestError, ForbiddenError, InternalError, MethodNotAllowedError, NotFoundError, otlpAnswer, TiError } from '@trace-ingest/shared/errors';
import { buildOpenApiDocument } from '@trace-ingest/shared/openapi';
import { CUSTOMER_TEXT } from '@trace-ingest/shared/fields';
import { ROUTES } from '@trace-ingest/shared/routes';
import type { BudgetAnswer } from './budgets.js';
import { ingestHandler } from './ingest.js';
import type { Metrics } from './metrics.js';
import { otlpTracesHandler, type OtlpDeps } from './otlp.js';
import { logFailure, refused, requestId } from './pipeline.js';
import { OTLP_TRACES_PATH, requestFormat, type OtlpCodec } from './otlp-codec.js';

export interface AppDeps extends OtlpDeps {
  /** Throws when a store cannot be reached or the write log is full. */
  checkReady: () => Promise<void>;
  /** The budget and this month's spend of an org (and a customer): GET /v1/budget. */
  budget?: (orgId: string, customer: string | undefined) => Promise<BudgetAnswer>;
  /** Express's `trust proxy`: which proxies' X-Forwarded-For names the client (its address limits failed authentications). */
  trustProxy?: string | false;
}

/** The ingest listener's routes, as their metric label (anything else is `other`). */
const ROUTE_LABELS = new Set(ROUTES.filter((r) => r.listener === 'ingest').map((r) => r.path));

/** The HTTP surface. Every answer that is not a 2xx is JSON with an `error` string. */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', deps.trustProxy ?? false);
  app.use(requestLog(deps.logger, deps.metrics));

  app.post('/ingest', ingestHandler(deps));
  app.all('/ingest', (req) => {
    throw new MethodNotAllowedError(req.method, '/ingest', ['POST']);
  });
  // Errors on the OTLP route are answered by its own handler, in OTLP's encoding.
  const otlpErrors = otlpErrorMiddleware(deps.logger, deps.metrics, deps.otlp.codec);
  app.post(OTLP_TRACES_PATH, otlpTracesHandler(deps), otlpErrors);
  app.all(
    OTLP_TRACES_PATH,
    (req: Request) => {
      throw new MethodNotAllowedError(req.method, OTLP_TRACES_PATH, ['POST']);
    },
    otlpErrors,
  );

  // Advisory: spans are priced after the model call, so the app decides whether to refuse the next one.
  const budget = deps.budget;
  if (budget !== undefined) {
    app.get('/v1/budget', async (req, res) => {
      const key = await deps.auth.authenticate(req, 'budget:read', { client: req.ip, listener: 'ingest' });
      res.locals.keyPrefix = key.prefix;
      res.locals.orgId = key.orgId;
      await deps.limiter.consume(key.keyId, key.rateLimitRps);
      const q = req.query.customer;
      if (q !== undefined && (typeof q !== 'string' || q === '' || [...q].length > CUSTOMER_TEXT.id[1]))
        throw new BadRequestError('TI_ERR_BAD_REQUEST', `customer: give one customer id of 1 to ${CUSTOMER_TEXT.id[1]} characters (?customer=<id>)`);
      // A key limited to named customers reads theirs only, never the org's total (the same answer for any other id).
      if (key.customers !== null && (q === undefined || !key.customers.includes(q)))
        throw new ForbiddenError('budget:read', "this API key reads the budgets of its named customers only: give ?customer=<one of the key's customers>");
      const answer = await budget(key.orgId, q);
      res.json(key.customers === null ? answer : { month: answer.month, asOf: answer.asOf, customer: answer.customer });
    });
    app.all('/v1/budget', (req) => {
      throw new MethodNotAllowedError(req.method, '/v1/budget', ['GET']);
    });
  }

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    if (deps.isDraining()) {
      res.status(503).json({ status: 'draining', error: 'server is shutting down' });
      return;
    }
    try {
      await deps.checkReady();
      res.json({ status: 'ready' });
    } catch (e) {
      // Each dependency's own answer, when the check names them: which one is slow or down.
      const checks = e instanceof NotReadyError ? { checks: e.checks } : {};
      res.status(503).json({ status: 'unavailable', error: e instanceof Error ? e.message : String(e), ...checks });
    }
  });
  const gets = ['/healthz', '/readyz', '/openapi.json'];
  const openapi = JSON.stringify(buildOpenApiDocument());
  app.get('/openapi.json', (_req, res) => {
    res.type('application/json').send(openapi);
  });
  for (const p of gets) {
    app.all(p, (req) => {
      throw new MethodNotAllowedError(req.method, p, ['GET']);
    });
  }

  app.use((req) => {
    throw new NotFoundError(`no route for ${req.method} ${req.path}; the API is POST /ingest (v1 JSON) and POST ${OTLP_TRACES_PATH} (OTLP/HTTP)`);
  });
  app.use(errorMiddleware(deps.logger, deps.metrics));
  return app;
}

/** One info line per request (never the key or the body), and the route metric. */
function requestLog(logger: Logger, metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = performance.now();
    const reqId = requestId(req.headers['x-request-id']);
    res.locals.reqId = reqId;
    res.setHeader('X-Request-Id', reqId);
    res.once('finish', () => {
      const route = ROUTE_LABELS.has(req.path) ? req.path : 'other';
      metrics.httpRequests.inc({ route, method: req.method, status: String(res.statusCode) });
      logger.info(
        {
          reqId,
          method: req.method,
          path: route === 'other' ? req.path.slice(0, 200) : route,
          status: res.statusCode,
          durationMs: Math.round((performance.now() - started) * 100) / 100,
          orgId: res.locals.orgId as string | undefined,
          keyPrefix: res.locals.keyPrefix as string | undefined,
          code: res.locals.errorCode as string | undefined,
        },
        'request',
      );
    });
    next();
  };
}

/**
 * What every error answer does before it is sent, on any route: the log line
 * for our own failures (4xx are the caller's and appear in the request line),
 * the refusal metrics of the ingest routes, and closing a connection whose
 * body was not read to its end.
 */
function noteError(e: TiError, err: unknown, req: Request, res: Response, logger: Logger, metrics: Metrics): void {
  res.locals.errorCode = e.code;
  logFailure(logger, e, err, res.locals.reqId as string);
  if (isIngestRoute(req)) refused(metrics, e);
  // A body cut off at the limit, or never read, must not be read further: close after answering.
  if (e.httpCode === 413 || !req.complete) res.setHeader('Connection', 'close');
}

/** The one place where an error becomes a JSON answer: `{error, code}` with the catalog's status. */
export function errorMiddleware(logger: Logger, metrics: Metrics) {
  return (err: unknown, req: Request, res: Response, next: NextFunction): void => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const e = toTiError(err, req);
    noteError(e, err, req, res, logger, metrics);
    res.set(e.headers).status(e.httpCode).json(e.toBody());
  };
}

/**
 * The OTLP route's error answer: a google.rpc.Status encoded like the
 * request (JSON when its type is not one of OTLP's), with the status and
 * code the catalog gives each error for OTLP exporters.
 */
export function otlpErrorMiddleware(logger: Logger, metrics: Metrics, codec: OtlpCodec) {
  return (err: unknown, req: Request, res: Response, next: NextFunction): void => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const e = toTiError(err, req);
    noteError(e, err, req, res, logger, metrics);
    const format = requestFormat(req.headers['content-type']) ?? 'json';
    const { http, grpc } = otlpAnswer(e);
    res
      .set(e.headers)
      .status(http)
      .type(format === 'json' ? 'application/json' : 'application/x-protobuf')
      .send(codec.encodeStatus(format, grpc, e.message));
  };
}

function toTiError(err: unknown, req: Request): TiError {
  if (err instanceof TiError) return err;
  const status = (err as { status?: unknown; statusCode?: unknown }).status ?? (err as { statusCode?: unknown }).statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new BadRequestError('TI_ERR_BAD_REQUEST', err instanceof Error ? err.message : 'bad request');
  }
  return new InternalError(err, isIngestRoute(req) ? 'batch' : 'request');
}

const isIngestRoute = (req: Request): boolean => req.path === '/ingest' || req.path === OTLP_TRACES_PATH;
