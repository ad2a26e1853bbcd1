import { randomBytes } from 'node:crypto';
import { UsageError } from '@trace-ingest/shared/errors';
import type { ControlDriver } from './control-store.js';
import type { SecretBox } from './secret-box.js';

/**
 * Webhook signing secrets at rest: made here, stored sealed (SecretBox),
 * opened only to sign, rotated with an overlap during which the old secret
 * signs beside the new one, so a receiver can move to the new one without
 * refusing an alert.
 */

export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/** The sealed columns of a budget's webhook secrets. */
export interface StoredWebhookSecrets {
  webhookSecret: string | null;
  webhookSecretPrevious: string | null;
  webhookSecretPreviousUntil: number | null;
}

/** The secrets an alert is signed with now: the budget's own, then the one before it while its overlap lasts. */
export function signingSecrets(box: SecretBox, s: StoredWebhookSecrets, now = Date.now()): string[] {
  if (s.webhookSecret === null) return [];
  const out = [box.open(s.webhookSecret)];
  if (s.webhookSecretPrevious !== null && Number(s.webhookSecretPreviousUntil ?? 0) > now) out.push(box.open(s.webhookSecretPrevious));
  return out;
}

/** Seals every webhook secret stored in plain text (before sealing existed) or under an older key; returns how many. */
export async function sealWebhookSecrets(driver: ControlDriver, box: SecretBox): Promise<number> {
  const rows = await driver.all<{ id: string; current: string | null; previous: string | null }>(
    'SELECT id, webhook_secret AS current, webhook_secret_previous AS previous FROM budgets ' +
      'WHERE webhook_secret IS NOT NULL OR webhook_secret_previous IS NOT NULL',
    [],
  );
  let n = 0;
  for (const r of rows) {
    const reseal = (v: string | null) => (v === null || !box.needsSealing(v) ? v : box.seal(box.open(v)));
    const current = reseal(r.current);
    const previous = reseal(r.previous);
    if (current === r.current && previous === r.previous) continue;
    // Only if nobody changed the row meanwhile (a rotation by another process wins).
    await driver.all('UPDATE budgets SET webhook_secret = ?, webhook_secret_previous = ? WHERE id = ? AND webhook_secret IS NOT DISTINCT FROM ?', [
      current,
      previous,
      r.id,
      r.current,
    ]);
    n++;
  }
  return n;
}

/**
 * Gives the budget of (org, customer) a new secret and returns it (shown
 * once). The secret it replaces signs alongside it for `overlapMs` (0: it
 * stops at once).
 */
export async function rotateWebhookSecret(
  driver: ControlDriver,
  box: SecretBox,
  budget: { orgId: string; customerId: string },
  overlapMs: number,
  now = Date.now(),
): Promise<string> {
  const [row] = await driver.all<{ id: string; current: string | null }>(
    'SELECT id, webhook_secret AS current FROM budgets WHERE org_id = ? AND customer_id = ?',
    [budget.orgId, budget.customerId],
  );
  if (row === undefined) throw new UsageError('no such budget; see "trace-ingest budgets list"');
  if (row.current === null) throw new UsageError('this budget has no webhook, so no secret to rotate; give it one with "budgets set ... --webhook <url>"');
  const secret = newWebhookSecret();
  await driver.all('UPDATE budgets SET webhook_secret = ?, webhook_secret_previous = ?, webhook_secret_previous_until = ? WHERE id = ?', [
    box.seal(secret),
    overlapMs > 0 ? row.current : null,
    overlapMs > 0 ? now + overlapMs : null,
    row.id,
  ]);
  return secret;
}
