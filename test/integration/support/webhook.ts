import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The README's recipe for a budget alert's receiver: the signature header's
 * timestamp within the tolerance (5 minutes) of now, and one of its v1
 * signatures the HMAC-SHA256 of "<timestamp>.<raw body>" with the secret,
 * compared in constant time.
 */
export function verifySignature(header: string, body: Buffer, secret: string, nowMs = Date.now(), toleranceSec = 300): boolean {
  const parts = header.split(',').map((p) => p.split('=', 2) as [string, string | undefined]);
  const t = Number(parts.find(([k]) => k === 't')?.[1]);
  if (!Number.isInteger(t) || Math.abs(nowMs / 1000 - t) > toleranceSec) return false;
  const expected = createHmac('sha256', secret).update(`${t}.`).update(body).digest();
  return parts.some(([k, v]) => k === 'v1' && v !== undefined && v.length === 64 && timingSafeEqual(Buffer.from(v, 'hex'), expected));
}
