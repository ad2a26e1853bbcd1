import type { IncomingHttpHeaders } from 'node:http';
import { AmbiguousCredentialsError, ForbiddenError, UnauthorizedError } from '@trace-ingest/shared/errors';
import { hashApiKey, isWellFormedKey } from '@trace-ingest/shared/ids';
import type { KeyScope } from '@trace-ingest/shared/scopes';
import type { ControlStore, ResolvedKey } from '@trace-ingest/store/control-store-types';
import type { AuthFailures, Listener } from './auth-failures.js';

const BEARER = /^bearer[ \t]+(\S+)[ \t]*$/i;

/**
 * What a credential is read from: an HTTP request (Express's `req` is one), or
 * a gRPC call's metadata given as headers (a repeated key as an array). The
 * raw headers, when there are any, tell two headers of one name apart (Node
 * keeps the first Authorization and drops the others).
 */
export interface CredentialSource {
  headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>;
  rawHeaders?: readonly string[];
}

/** The values of a header, however often it was sent. */
function values(src: CredentialSource, name: string): string[] {
  if (src.rawHeaders !== undefined) {
    const out: string[] = [];
    for (let i = 0; i + 1 < src.rawHeaders.length; i += 2) if (src.rawHeaders[i]?.toLowerCase() === name) out.push(src.rawHeaders[i + 1] ?? '');
    return out;
  }
  const v = src.headers[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

/**
 * The credential of a request: `Authorization: Bearer <key>` or `x-api-key`,
 * or undefined when neither is sent. A header sent twice, or both headers
 * carrying different values (or an Authorization that is not a bearer key next
 * to an x-api-key), is refused with 400 rather than resolved by precedence,
 * so a proxy or firewall that reads the other copy can never be shown one
 * identity while the request runs as another.
 */
export function presentedKey(src: CredentialSource): string | undefined {
  const auth = values(src, 'authorization').filter((v) => v !== '');
  const x = values(src, 'x-api-key')
    .map((v) => v.trim())
    .filter((v) => v !== '');
  if (auth.length > 1) throw new AmbiguousCredentialsError('the request carries two Authorization headers; send the credential once');
  if (x.length > 1 || x[0]?.includes(',') === true) throw new AmbiguousCredentialsError('the request carries two x-api-key headers; send the key once');
  const [authorization] = auth;
  const [xApiKey] = x;
  if (authorization === undefined) return xApiKey;
  const bearer = BEARER.exec(authorization)?.[1];
  if (xApiKey !== undefined && bearer !== xApiKey)
    throw new AmbiguousCredentialsError('the Authorization and x-api-key headers carry different credentials; send the key in one of them');
  return bearer;
}

/** A bearer token from the Authorization header alone (console, metrics), with the same refusal of a second copy. */
export function presentedBearer(src: CredentialSource): string | undefined {
  const auth = values(src, 'authorization').filter((v) => v !== '');
  if (auth.length > 1) throw new AmbiguousCredentialsError('the request carries two Authorization headers; send the credential once');
  const [authorization] = auth;
  return authorization === undefined ? undefined : BEARER.exec(authorization)?.[1];
}

/**
 * Refuses a key without `scope`. On POST /ingest the answer is 401 (the v1
 * contract answers 401 for a key it does not take), elsewhere 403; the
 * message names the scope either way. The OTLP/gRPC listener calls this too.
 */
export function requireScope(key: Pick<ResolvedKey, 'scopes'>, scope: KeyScope, status: 401 | 403 = 403): void {
  if (!key.scopes.includes(scope)) throw new ForbiddenError(scope, undefined, { status });
}

export interface AuthOptions {
  /** The caller's address, for the failed-authentication limit; none: not limited (in-process callers). */
  client?: string | undefined;
  /** Which listener the request came in on, for the metric. */
  listener?: Listener;
  /** The status of a refusal for a missing scope (401 on POST /ingest). */
  forbiddenStatus?: 401 | 403;
}

/**
 * Resolves the key of a request by its SHA-256 alone, on every request, so a
 * revoked key or a changed plan takes effect on the next one (the store
 * answers from memory only while its rows cannot have changed), and checks the
 * scope the route needs. A client address over its failed-authentication
 * limit is refused before its key is looked at. The key itself is never
 * logged, stored or echoed.
 */
export class Authenticator {
  constructor(
    private readonly keys: ControlStore,
    private readonly failures?: AuthFailures,
  ) {}

  async authenticate(src: CredentialSource, scope: KeyScope, opts: AuthOptions = {}): Promise<ResolvedKey> {
    const key = presentedKey(src);
    if (key === undefined) throw new UnauthorizedError();
    this.failures?.check(opts.client, opts.listener);
    const resolved = isWellFormedKey(key) ? await this.keys.resolveKeyHash(hashApiKey(key)) : null;
    if (resolved === null) {
      this.failures?.fail(opts.client, opts.listener ?? 'ingest');
      throw new UnauthorizedError(
        isWellFormedKey(key) ? 'unknown or revoked API key' : 'invalid API key: keys start with "ti_"; create one with "trace-ingest keys create --org <org>"',
      );
    }
    requireScope(resolved, scope, opts.forbiddenStatus);
    return resolved;
  }
}
