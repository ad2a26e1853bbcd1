import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
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

describe('the storage format', () => {
  const format = async (file: DuckDbFile): Promise<unknown> =>
    (await file.query("SELECT tags['storage_version'] AS v FROM duckdb_databases() WHERE database_name = current_database()"))[0]?.v;

  it('writes a new file in v1.5.0, and brings a file of an older one to it at attach with its rows', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-duckdb-format-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const fresh = new DuckDbFile({ file: path.join(dir, 'new.duckdb'), tmpDir: path.join(dir, 'tmp') }, () => Promise.resolve());
    onTestFinished(() => fresh.close());
    await fresh.open();
    expect(await format(fresh)).toBe('v1.5.0+');

    // A file written by an earlier release, in DuckDB's default format of its time.
    const old = path.join(dir, 'old.duckdb');
    const instance = await DuckDBInstance.create(':memory:');
    const c = await instance.connect();
    await c.run(`ATTACH '${old}' AS o (STORAGE_VERSION 'v1.0.0')`);
    await c.run('CREATE TABLE o.t AS SELECT range AS k FROM range(20000)');
    await c.run('DETACH o');
    c.closeSync();
    instance.closeSync();

    for (const readOnly of [false, true]) {
      const file = new DuckDbFile({ file: old, tmpDir: path.join(dir, 'tmp'), readOnly }, () => Promise.resolve());
      await file.open();
      try {
        expect(await format(file)).toBe('v1.5.0+');
        if (!readOnly) await file.run('INSERT INTO t VALUES (20000)');
        expect(await file.query('SELECT count(*)::INTEGER AS n, max(k)::INTEGER AS k FROM t')).toEqual([{ n: 20001, k: 20000 }]);
      } finally {
        await file.close();
      }
    }
  });
});

describe('memory kept for blocks', () => {
  const setting = async (file: DuckDbFile): Promise<unknown> => (await file.query("SELECT current_setting('block_allocator_memory') AS v"))[0]?.v;

  it("is DuckDB's block_allocator_memory when given, none otherwise, and inserts run through it", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-duckdb-blocks-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    for (const [blockAllocatorMemory, expected] of [
      ['16MiB', '16.0 MiB'],
      [undefined, '0 bytes'],
    ] as const) {
      const file = new DuckDbFile({ file: path.join(dir, `${expected}.duckdb`), tmpDir: path.join(dir, 'tmp'), blockAllocatorMemory }, () => Promise.resolve());
      await file.open();
      try {
        expect(await setting(file)).toBe(expected);
        // More blocks than the kept memory holds, written and dropped again: blocks come back to it and beyond it.
        for (let i = 0; i < 3; i++) {
          await file.run('CREATE OR REPLACE TABLE t AS SELECT range AS k, repeat(range::VARCHAR, 50) AS s FROM range(200000)');
          expect(await file.query('SELECT count(*)::INTEGER AS n FROM t')).toEqual([{ n: 200000 }]);
        }
      } finally {
        await file.close();
      }
    }
  });
});
