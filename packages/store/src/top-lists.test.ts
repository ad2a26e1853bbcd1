import { describe, expect, it } from 'vitest';
import { RefreshScope } from './top-lists.js';

/** Lists that record each refresh and finish it when told to. */
function recording() {
  const calls: string[] = [];
  const pending: (() => void)[] = [];
  let failNext = false;
  return {
    calls,
    finish: () => pending.splice(0).forEach((done) => done()),
    failNextRefresh: () => (failNext = true),
    ready(list: string, orgId: string, fromDay: string, toDay: string): Promise<boolean> {
      calls.push(`${list} ${orgId} ${fromDay}..${toDay}`);
      if (failNext) {
        failNext = false;
        return Promise.reject(new Error('the store is down'));
      }
      return new Promise((resolve) => pending.push(() => resolve(true)));
    },
  };
}

describe('RefreshScope', () => {
  it('refreshes each day of a list once among the reads that share it, however their ranges overlap', async () => {
    const lists = recording();
    const scope = new RefreshScope();
    const first = scope.refresh(lists, 'trace', 'org_a', '2026-10-05', '2026-10-08');
    const same = scope.refresh(lists, 'trace', 'org_a', '2026-10-05', '2026-10-08');
    // A wider range: only the days on either side are refreshed, in a run each.
    const wider = scope.refresh(lists, 'trace', 'org_a', '2026-10-01', '2026-10-10');
    // Another list, another org: refreshed on their own.
    const session = scope.refresh(lists, 'session', 'org_a', '2026-10-05', '2026-10-06');
    const other = scope.refresh(lists, 'trace', 'org_b', '2026-10-05', '2026-10-06');
    expect(lists.calls).toEqual([
      'trace org_a 2026-10-05..2026-10-08',
      'trace org_a 2026-10-01..2026-10-05',
      'trace org_a 2026-10-08..2026-10-10',
      'session org_a 2026-10-05..2026-10-06',
      'trace org_b 2026-10-05..2026-10-06',
    ]);
    let settled = false;
    void same.then(() => (settled = true));
    await Promise.resolve();
    // A read of days being refreshed waits for that refresh.
    expect(settled).toBe(false);
    lists.finish();
    await Promise.all([first, same, wider, session, other]);
    await scope.refresh(lists, 'trace', 'org_a', '2026-10-02', '2026-10-09');
    expect(lists.calls).toHaveLength(5);
  });

  it('fails every read of the days whose refresh failed, and leaves other scopes free to try again', async () => {
    const lists = recording();
    const scope = new RefreshScope();
    lists.failNextRefresh();
    await expect(scope.refresh(lists, 'trace', 'org_a', '2026-10-05', '2026-10-07')).rejects.toThrow('the store is down');
    await expect(scope.refresh(lists, 'trace', 'org_a', '2026-10-06', '2026-10-07')).rejects.toThrow('the store is down');
    const again = new RefreshScope().refresh(lists, 'trace', 'org_a', '2026-10-05', '2026-10-07');
    lists.finish();
    await again;
    expect(lists.calls).toEqual(['trace org_a 2026-10-05..2026-10-07', 'trace org_a 2026-10-05..2026-10-07']);
  });

  it('refreshes nothing for an empty range, and any range in one call', async () => {
    const lists = recording();
    const scope = new RefreshScope();
    await scope.refresh(lists, 'trace', 'org_a', '2026-10-05', '2026-10-05');
    expect(lists.calls).toEqual([]);
    // Ranges, not days, are kept: a range of millennia costs what a day does.
    const all = scope.refresh(lists, 'trace', 'org_a', '0001-01-01', '9999-12-31');
    lists.finish();
    await all;
    await scope.refresh(lists, 'trace', 'org_a', '1970-01-01', '2100-01-01');
    expect(lists.calls).toEqual(['trace org_a 0001-01-01..9999-12-31']);
  });
});
