import { createHmac } from 'node:crypto';

/**
 * How a budget alert leaves the server: signed over a timestamp and the raw
 * body, as Stripe signs (`X-Trace-Ingest-Signature: t=<unix seconds>,v1=<hex
 * HMAC-SHA256 of "<t>.<body>">`, one `v1` per secret while a rotated secret
 * overlaps), so a receiver can refuse a delivery older than its tolerance
 * (the README says 5 minutes) and a captured one cannot be replayed later.
 * Each attempt is signed afresh. Redirects are never followed: the alert goes
 * to the address the operator set, or nowhere.
 */

export const SIGNATURE_HEADER = 'x-trace-ingest-signature';

/** The signature header's value for `body` at `atMs`, one `v1` per secret. */
export function webhookSignature(secrets: readonly string[], body: string, atMs: number): string {
  const t = Math.floor(atMs / 1000);
  return [`t=${t}`, ...secrets.map((s) => `v1=${createHmac('sha256', s).update(`${t}.${body}`).digest('hex')}`)].join(',');
}

/** Posts a signed alert; throws with the reason when it was not taken (no answer in time, a redirect, not 2xx). */
export async function postWebhook(
  url: string,
  alert: { id: string; body: string; secrets: readonly string[] },
  timeoutMs: number,
  now = Date.now(),
): Promise<void> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-trace-ingest-event-id': alert.id,
      [SIGNATURE_HEADER]: webhookSignature(alert.secrets, alert.body, now),
    },
    body: alert.body,
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
  });
  await res.arrayBuffer().catch(() => undefined);
  if (res.status >= 300 && res.status < 400)
    throw new Error(
      `the webhook answered a redirect (${res.status}); alerts are not sent on to another address: set the final URL with "budgets set --webhook"`,
    );
  if (!res.ok) throw new Error(`the webhook answered ${res.status}`);
}
