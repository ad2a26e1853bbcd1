/**
 * Every route of every listener and the credential it needs: the README's
 * route-by-credential table is this list, and a test checks it against the
 * routes the apps register and against a real server's answers.
 */

export type Listener = 'ingest' | 'metrics' | 'console' | 'admin';

export type Credential =
  /** Anyone who reaches the port. */
  | 'none'
  /** An API key with this scope. */
  | 'key: ingest'
  | 'key: budget:read'
  /** METRICS_TOKEN as a bearer token (required beyond loopback; on loopback only when set). */
  | 'metrics token'
  /** A console token; one limited to an org sees that org alone. */
  | 'console token'
  /** The admin socket's owner (the file is 0600): the server's user, or root. */
  | 'socket owner';

export interface Route {
  listener: Listener;
  method: 'GET' | 'POST';
  /** Express's path; `*` ends a prefix (the console page's files). */
  path: string;
  credential: Credential;
  /** What it tells or does, for the table. */
  what: string;
}

export const ROUTES: readonly Route[] = [
  { listener: 'ingest', method: 'POST', path: '/ingest', credential: 'key: ingest', what: 'v1 batches (write only)' },
  { listener: 'ingest', method: 'POST', path: '/v1/traces', credential: 'key: ingest', what: 'OTLP/HTTP traces (write only)' },
  {
    listener: 'ingest',
    method: 'GET',
    path: '/v1/budget',
    credential: 'key: budget:read',
    what: "this month's budget and spend of the key's org or named customers",
  },
  { listener: 'ingest', method: 'GET', path: '/healthz', credential: 'none', what: 'the process is up' },
  { listener: 'ingest', method: 'GET', path: '/readyz', credential: 'none', what: 'ready to store batches, or why not (no org or customer named)' },
  { listener: 'ingest', method: 'GET', path: '/openapi.json', credential: 'none', what: 'the API description' },
  {
    listener: 'metrics',
    method: 'GET',
    path: '/metrics',
    credential: 'metrics token',
    what: 'Prometheus metrics (org ids, models; customer ids only if allowed)',
  },
  { listener: 'console', method: 'GET', path: '/', credential: 'none', what: 'a redirect to /console/' },
  { listener: 'console', method: 'GET', path: '/console/*', credential: 'none', what: 'the page itself (no figures)' },
  { listener: 'console', method: 'GET', path: '/console/api/orgs', credential: 'console token', what: 'the orgs the token may see' },
  { listener: 'console', method: 'GET', path: '/console/api/overview', credential: 'console token', what: "an org's costs per day and model" },
  { listener: 'console', method: 'GET', path: '/console/api/customers', credential: 'console token', what: 'cost per customer' },
  { listener: 'console', method: 'GET', path: '/console/api/models', credential: 'console token', what: 'cost per model, prices in force' },
  { listener: 'console', method: 'GET', path: '/console/api/traces', credential: 'console token', what: 'the costliest traces' },
  {
    listener: 'console',
    method: 'GET',
    path: '/console/api/traces/:traceId',
    credential: 'console token',
    what: "one trace's spans: timing, tokens, cost (never texts)",
  },
  { listener: 'admin', method: 'GET', path: '/v1/ping', credential: 'socket owner', what: 'the running server, its ports' },
  { listener: 'admin', method: 'POST', path: '/v1/query', credential: 'socket owner', what: '`sql`: a read-only query' },
  { listener: 'admin', method: 'POST', path: '/v1/usage', credential: 'socket owner', what: '`usage`' },
  { listener: 'admin', method: 'POST', path: '/v1/export/rows', credential: 'socket owner', what: '`export`: every column, texts included' },
  { listener: 'admin', method: 'POST', path: '/v1/export/focus', credential: 'socket owner', what: '`export --format focus`: FOCUS charge rows (no texts)' },
  {
    listener: 'admin',
    method: 'POST',
    path: '/v1/forecast',
    credential: 'socket owner',
    what: "`usage`'s month-end forecast: an org's daily spend by customer",
  },
  { listener: 'admin', method: 'POST', path: '/v1/erase', credential: 'socket owner', what: '`erase` (recorded in the audit log)' },
  { listener: 'admin', method: 'GET', path: '/v1/disk', credential: 'socket owner', what: 'the disk forecast' },
  { listener: 'admin', method: 'POST', path: '/v1/reprice', credential: 'socket owner', what: '`reprice` (recorded in the audit log)' },
];
