import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { DuckDbFile, isConflict } from './duckdb-file.js';

async function openFile(): Promise<{ file: DuckDbFile; begins: () => number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-duckdb-file-'));
  const file = new DuckDbFile({ file: path.join(dir, 'spans.duckdb'), tmpDir: path.join(dir, 'tmp') }, () => Promise.resolve());
  onTestFinished(async () => {
    await file.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await file.open();
  await file.run('CREATE TABLE t (k INTEGER, v INTEGER)');
  await file.run('INSERT INTO t VALUES (1, 1), (2, 2)');
  let n = 0;
  const run = file.run.bind(file);
  file.run = (sql: string) => {
    if (sql === 'BEGIN TRANSACTION') n++;
    return run(sql);
  };
  return { file, begins: () => n };
}

describe('a writer transaction beside another connection that changes the same rows', () => {
  it('runs again once the other commits, and gives up with the conflict when it does not', async () => {
    const { file, begins } = await openFile();
    const beside = await file.connect();
    onTestFinished(() => beside.closeSync());

    // The other connection deletes a row first and commits a moment later: the writer's delete of it meets a conflict,
    // and its transaction runs again from the start, then finds the row gone.
    await file.runOn(beside, 'BEGIN TRANSACTION');
    await file.runOn(beside, 'DELETE FROM t WHERE k = 1');
    let deleted = -1;
    const writing = file.transaction(async () => {
      deleted = await file.run('DELETE FROM t WHERE k = 1');
      await file.run('UPDATE t SET v = v + 10 WHERE k = 2');
    });
    await new Promise((r) => setTimeout(r, 5));
    await file.runOn(beside, 'COMMIT');
    await writing;
    expect(begins()).toBeGreaterThan(1);
    expect(deleted).toBe(0);
    expect(await file.rows('SELECT k, v FROM t ORDER BY k')).toEqual([{ k: 2, v: 12 }]);

    // Held open longer than every try: the conflict reaches the caller, and nothing of the writer's stays.
    await file.runOn(beside, 'BEGIN TRANSACTION');
    await file.runOn(beside, 'UPDATE t SET v = 0 WHERE k = 2');
    const failed = await file.transaction(() => file.run('UPDATE t SET v = v + 1 WHERE k = 2').then(() => undefined)).catch((e: unknown) => e);
    expect(isConflict(failed)).toBe(true);
    await file.runOn(beside, 'ROLLBACK');
    expect(await file.rows('SELECT k, v FROM t ORDER BY k')).toEqual([{ k: 2, v: 12 }]);
  });

  it('does not run again after an error that is not a conflict', async () => {
    const { file, begins } = await openFile();
    const failed = await file
      .transaction(() => file.run('INSERT INTO t VALUES (3, 3)').then(() => file.run('SELECT * FROM missing').then(() => undefined)))
      .catch((e: unknown) => e);
    expect(isConflict(failed)).toBe(false);
    expect(begins()).toBe(1);
    expect(await file.rows('SELECT count(*)::INTEGER AS n FROM t')).toEqual([{ n: 2 }]);
  });
});
