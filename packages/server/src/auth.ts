import type { IncomingHttpHeaders } from 'node:http';
import { UnauthorizedError } from '@trace-ingest/shared/errors';
import { hashApiKey, isWellFormedKey } from '@trace-ingest/shared/ids';
import type { ControlStore, ResolvedKey } from '@trace-ingest/store/control-store-types';

const BEARER = /^bearer[ \t]+(\S+)[ \t]*$/i;

/** What each header form carries: a string (possibly not a key), or undefined when the header is absent or empty. */
function headerForms(headers: IncomingHttpHeaders): { authorization: string | undefined; xApiKey: string | undefined } {
  const auth = headers.authorization;
  const x = headers['x-api-key'];
  const v = Array.isArray(x) ? x[0] : x;
  return {
    authorization: auth === undefined || auth === '' ? undefined : auth,
    xApiKey: v === undefined || v.trim() === '' ? undefined : v.trim(),
  };
}

/**
 * The presented key from `Authorization: Bearer <key>` or `x-api-key`, or
 * undefined. When both headers are sent they must carry the same key: two
 * different keys (or an Authorization header that is not a bearer key next to
 * an x-api-key) are refused rather than resolved by precedence, so a proxy or
 * firewall that reads the other header can never be shown one identity while
 * the batch is written under another.
 */
export function presentedKey(headers: IncomingHttpHeaders): string | undefined {
  const { authorization, xApiKey } = headerForms(headers);
  if (authorization === undefined) return xApiKey;
  const bearer = BEARER.exec(authorization)?.[1];
  if (xApiKey !== undefined && bearer !== xApiKey) return undefined;
  return bearer;
}

/**
 * Resolves the key of a request by its SHA-256 alone, on every request, so a
 * revoked key or a changed plan takes effect on the next one. The key itself
 * is never logged, stored or echoed.
 */
export class Authenticator {
  constructor(private readonly keys: ControlStore) {}

  async authenticate(headers: IncomingHttpHeaders): Promise<ResolvedKey> {
    const key = presentedKey(headers);
    if (key === undefined) {
      const { authorization, xApiKey } = headerForms(headers);
      if (authorization !== undefined && xApiKey !== undefined) {
        throw new UnauthorizedError('the Authorization and x-api-key headers carry different API keys; send the key in one of them');
      }
      throw new UnauthorizedError();
    }
    if (!isWellFormedKey(key)) throw new UnauthorizedError('invalid API key: keys start with "ti_"; create one with "trace-ingest keys create --org <org>"');
    const resolved = await this.keys.resolveKeyHash(hashApiKey(key));
    if (resolved === null) throw new UnauthorizedError('unknown or revoked API key');
    return resolved;
  }
}
