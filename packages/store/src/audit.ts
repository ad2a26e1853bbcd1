import { createHash } from 'node:crypto';
import type { EraseCounts, EraseKind, EraseTarget } from '@trace-ingest/shared/lifecycle';
import type { ControlStore } from './control-store-types.js';
import type { RepriceFilter, RepriceResult } from './reports.js';

/**
 * The audit log's entries for changes to stored spans, written by whoever
 * makes the change: the server for what reaches it over the admin socket (a
 * request posted to the socket by hand included), the CLI for what it does
 * to a store it opened itself.
 */

/** The id as the audit log keeps it: a digest, so the log does not hold what was erased. */
export function auditTarget(kind: EraseKind, id: string): string {
  return `${kind} sha256:${createHash('sha256').update(id).digest('hex').slice(0, 16)}`;
}

export async function auditErase(keys: ControlStore, e: { actor: string; orgId: string; target: EraseTarget; counts: EraseCounts }): Promise<void> {
  await keys.appendAudit({
    actor: e.actor,
    action: 'erase',
    orgId: e.orgId,
    target: auditTarget(e.target.kind, e.target.id),
    detail: JSON.stringify(e.counts),
  });
}

export async function auditReprice(keys: ControlStore, e: { actor: string; filter: RepriceFilter; result: RepriceResult }): Promise<void> {
  const { orgId, from, to, model } = e.filter;
  await keys.appendAudit({
    actor: e.actor,
    action: 'reprice',
    orgId,
    target: model === undefined ? '' : `model ${model}`,
    detail: JSON.stringify({
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      rowsChanged: e.result.rowsChanged,
      costDifference: e.result.costDifference,
    }),
  });
}
