import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import type { Logger } from 'pino';
import { MethodNotAllowedError, NotFoundError, UnauthorizedError } from '@trace-ingest/shared/errors';
import { errorMiddleware } from './app.js';
import type { AuthFailures } from './auth-failures.js';
import { presentedBearer } from './auth.js';
import type { Metrics } from './metrics.js';

export interface MetricsAppDeps {
  metrics: Metrics;
  logger: Logger;
  /** The bearer token /metrics requires; undefined on a loopback listener without one. */
  token: string | undefined;
  failures: AuthFailures;
  trustProxy?: string | false;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * /metrics on a listener of its own (METRICS_HOST:METRICS_PORT, loopback by
 * default), never on the ingest port: the metrics name orgs, models and,
 * when the operator allows it, customers. Beyond loopback a bearer token is
 * required (the configuration refuses to start without one), compared by
 * digest in constant time; wrong tokens count as failed authentications.
 */
export function createMetricsApp(deps: MetricsAppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', deps.trustProxy ?? false);
  const expected = deps.token === undefined ? undefined : digest(deps.token);
  app.get('/metrics', async (req: Request, res: Response) => {
    if (expected !== undefined) {
      const given = presentedBearer(req);
      if (given === undefined) throw new UnauthorizedError('/metrics needs "Authorization: Bearer <METRICS_TOKEN>"');
      deps.failures.check(req.ip, 'metrics');
      if (!timingSafeEqual(digest(given), expected)) {
        deps.failures.fail(req.ip, 'metrics');
        throw new UnauthorizedError('wrong metrics token: send METRICS_TOKEN as "Authorization: Bearer <token>"');
      }
    }
    res.setHeader('Cache-Control', 'no-store');
    res.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });
  app.all('/metrics', (req) => {
    throw new MethodNotAllowedError(req.method, '/metrics', ['GET']);
  });
  app.use((req) => {
    throw new NotFoundError(`no route for ${req.method} ${req.path}; this listener serves GET /metrics`);
  });
  app.use(errorMiddleware(deps.logger, deps.metrics));
  return app;
}
