import express, { type NextFunction, type Request, type Response } from 'express';
import type { Logger } from 'pino';
import { buildOpenApiDocument } from '@trace-ingest/shared/openapi';
import { InternalError, MethodNotAllowedError, NotFoundError, TiError } from '@trace-ingest/shared/errors';
import { ingestHandler, type IngestDeps } from './ingest.js';
import type { Metrics } from './metrics.js';

export interface AppDeps extends IngestDeps {
  /** Throws when a store cannot be reached. */
  checkReady: () => Promise<void>;
  metrics: Metrics;
  logger: Logger;
}

/** The HTTP surface. Every answer that is not a 2xx is JSON with an `error` string. */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  app.post('/ingest', ingestHandler(deps));
  app.all('/ingest', (req) => {
    throw new MethodNotAllowedError(req.method, '/ingest', ['POST']);
  });

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
      res.status(503).json({ status: 'unavailable', error: `a store is unreachable: ${e instanceof Error ? e.message : String(e)}` });
    }
  });
  app.get('/metrics', async (_req, res) => {
    res.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });
  const openapi = JSON.stringify(buildOpenApiDocument());
  app.get('/openapi.json', (_req, res) => {
    res.type('application/json').send(openapi);
  });
  for (const p of ['/healthz', '/readyz', '/metrics', '/openapi.json']) {
    app.all(p, (req) => {
      throw new MethodNotAllowedError(req.method, p, ['GET']);
    });
  }

  app.use((req) => {
    throw new NotFoundError(`no route for ${req.method} ${req.path}; the API is POST /ingest`);
  });
  app.use(errorMiddleware(deps.logger, deps.metrics));
  return app;
}

/** The one place where an error becomes an HTTP answer. */
export function errorMiddleware(logger: Logger, metrics: Metrics) {
  return (err: unknown, req: Request, res: Response, next: NextFunction): void => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const e = toTiError(err);
    const log = { code: e.code, status: e.httpCode, method: req.method, path: req.path, keyPrefix: res.locals.keyPrefix as string | undefined };
    if (e.httpCode >= 500) logger.error({ ...log, err: err instanceof TiError ? (err.cause ?? err) : err }, e.message);
    else logger.info(log, e.message);
    if (req.path === '/ingest') metrics.requests.inc({ status: String(e.httpCode), code: e.code });
    // A body cut off at the limit must not be read further: close the connection after answering.
    if (e.httpCode === 413 || (req.readable && !req.complete)) res.set('Connection', 'close');
    res.set(e.headers).status(e.httpCode).json(e.toBody());
  };
}

function toTiError(err: unknown): TiError {
  if (err instanceof TiError) return err;
  const status = (err as { status?: unknown; statusCode?: unknown }).status ?? (err as { statusCode?: unknown }).statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new TiError(status, 'TI_ERR_BAD_REQUEST', err instanceof Error ? err.message : 'bad request');
  }
  return new InternalError(err);
}
