import { describe, expect, it } from 'vitest';
import { AuthFailures } from './auth-failures.js';
import { presentedBearer, presentedKey, requireScope } from './auth.js';
import { Metrics } from './metrics.js';

const KEY = `ti_${'a'.repeat(43)}`;
const OTHER = `ti_${'b'.repeat(43)}`;
const raw = (...pairs: string[]) => ({ headers: {}, rawHeaders: pairs });

describe('the credential of a request', () => {
  it('reads either header, and the same key in both', () => {
    expect(presentedKey(raw('Authorization', `Bearer ${KEY}`))).toBe(KEY);
    expect(presentedKey(raw('X-Api-Key', KEY))).toBe(KEY);
    expect(presentedKey(raw('authorization', `bearer ${KEY}`, 'x-api-key', KEY))).toBe(KEY);
    expect(presentedKey(raw('content-type', 'application/json'))).toBeUndefined();
  });

  it('refuses a credential sent twice, or two different ones, with 400', () => {
    const refused = [
      raw('Authorization', `Bearer ${KEY}`, 'Authorization', `Bearer ${KEY}`),
      raw('Authorization', `Bearer ${KEY}`, 'authorization', `Bearer ${OTHER}`),
      raw('x-api-key', KEY, 'X-API-KEY', OTHER),
      raw('Authorization', `Bearer ${KEY}`, 'x-api-key', OTHER),
      raw('Authorization', `Basic dTpw`, 'x-api-key', KEY),
      // Headers alone (a gRPC call's metadata): a repeated key, or Node's join of two x-api-key headers.
      { headers: { 'x-api-key': [KEY, OTHER] } },
      { headers: { 'x-api-key': `${KEY}, ${OTHER}` } },
    ];
    for (const src of refused)
      expect(() => presentedKey(src), JSON.stringify(src)).toThrow(expect.objectContaining({ code: 'TI_ERR_AMBIGUOUS_CREDENTIALS', httpCode: 400 }));
    expect(() => presentedBearer(raw('Authorization', 'Bearer a', 'Authorization', 'Bearer b'))).toThrow(/two Authorization headers/);
  });

  it('refuses a key without the scope a route needs: 403 naming it, or 401 where the contract says so', () => {
    expect(() => requireScope({ scopes: ['ingest'] }, 'ingest')).not.toThrow();
    expect(() => requireScope({ scopes: ['ingest'] }, 'budget:read')).toThrow(
      expect.objectContaining({ httpCode: 403, message: expect.stringContaining('"budget:read" scope') }),
    );
    expect(() => requireScope({ scopes: ['budget:read'] }, 'ingest', 401)).toThrow(expect.objectContaining({ httpCode: 401, code: 'TI_ERR_FORBIDDEN' }));
  });
});

describe('failed authentications per client address', () => {
  it('refuses an address past its limit until its minute is over, counts on every listener, and keeps other addresses apart', () => {
    let now = 1_000_000;
    const metrics = new Metrics({ defaultMetrics: false });
    const f = new AuthFailures(3, metrics, () => now);
    for (let i = 0; i < 3; i++) {
      f.check('10.0.0.1');
      f.fail('10.0.0.1', i === 0 ? 'console' : 'ingest');
    }
    expect(() => f.check('10.0.0.1')).toThrow(expect.objectContaining({ code: 'TI_ERR_AUTH_LIMITED', httpCode: 429, headers: { 'Retry-After': '60' } }));
    expect(() => f.check('10.0.0.2')).not.toThrow();
    now += 59_000;
    expect(() => f.check('10.0.0.1', 'metrics')).toThrow(expect.objectContaining({ headers: { 'Retry-After': '1' } }));
    now += 1_000;
    expect(() => f.check('10.0.0.1')).not.toThrow();
    expect(f.size).toBe(0);
  });

  it('keeps at most 50,000 addresses', () => {
    const now = 5;
    const f = new AuthFailures(3, new Metrics({ defaultMetrics: false }), () => now);
    for (let i = 0; i < 50_100; i++) f.fail(`a${i}`, 'ingest');
    expect(f.size).toBeLessThanOrEqual(50_000);
  });
});
