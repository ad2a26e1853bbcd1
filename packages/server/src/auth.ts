import type { IncomingHttpHeaders } from 'node:http';
import { UnauthorizedError } from '@trace-ingest/shared/errors';
import { hashApiKey, isWellFormedKey } from '@trace-ingest/shared/ids';
import type { KeyStore, ResolvedKey } from '@trace-ingest/store/key-store';

const BEARER = /^bearer[ \t]+(\S+)[ \t]*$/i;

/** The presented key from `Authorization: Bearer <key>` or `x-api-key`, or undefined. */
export function presentedKey(headers: IncomingHttpHeaders): string | undefined {
  const auth = headers.authorization;
  if (auth !== undefined && auth !== '') return BEARER.exec(auth)?.[1];
  const x = headers['x-api-key'];
  const v = Array.isArray(x) ? x[0] : x;
  return v === undefined || v === '' ? undefined : v.trim();
}

/**
 * Resolves the key of a request by its SHA-256 alone, on every request, so a
 * revoked key or a changed plan takes effect on the next one. The key itself
 * is never logged, stored or echoed.
 */
export class Authenticator {
  constructor(private readonly keys: KeyStore) {}

  async authenticate(headers: IncomingHttpHeaders): Promise<ResolvedKey> {
    const key = presentedKey(headers);
    if (key === undefined) throw new UnauthorizedError();
    if (!isWellFormedKey(key)) throw new UnauthorizedError('invalid API key: keys start with "ti_"; create one with "trace-ingest keys create --org <org>"');
    const resolved = await this.keys.resolveKeyHash(hashApiKey(key));
    if (resolved === null) throw new UnauthorizedError('unknown or revoked API key');
    return resolved;
  }
}
