import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { ConfigError } from '@trace-ingest/shared/errors';

/**
 * One server per DATA_DIR, whatever the span store: two would replay and
 * retire each other's write-log segments and unlink each other's admin
 * socket. The lock is SQLite's own file lock on `server.lock` (an fcntl lock
 * held by an EXCLUSIVE-mode connection), so the kernel releases it when the
 * holder dies, kill -9 included, and a pid reused by another program never
 * looks like a holder. `server.pid` names the holder for the refusal and for
 * `doctor`; it is a note, not the lock.
 */

export const LOCK_FILE = 'server.lock';
export const PID_FILE = 'server.pid';

export interface LockHolder {
  pid: number;
  startedAt: string;
  host: string;
}

/** A second server started on a DATA_DIR that one already holds. */
export class DataDirLockedError extends ConfigError {
  constructor(
    readonly dataDir: string,
    readonly holder: LockHolder | undefined,
  ) {
    super(
      holder === undefined
        ? `DATA_DIR ${dataDir} is in use by another trace-ingest server (${path.join(dataDir, LOCK_FILE)} is locked): stop it first; one server per DATA_DIR`
        : `DATA_DIR ${dataDir} is in use by another trace-ingest server (pid ${holder.pid} on ${holder.host}, started ${holder.startedAt}): ` +
            'stop it first; one server per DATA_DIR',
    );
  }
}

/** The holder named in DATA_DIR/server.pid, if the file is there and readable. */
export function readLockHolder(dataDir: string): LockHolder | undefined {
  try {
    const h = JSON.parse(fs.readFileSync(path.join(dataDir, PID_FILE), 'utf8')) as Partial<LockHolder>;
    if (typeof h.pid !== 'number') return undefined;
    return { pid: h.pid, startedAt: String(h.startedAt ?? '?'), host: String(h.host ?? '?') };
  } catch {
    return undefined;
  }
}

/** True when a server holds DATA_DIR's lock now (probed without keeping it). */
export function isDataDirLocked(dataDir: string): boolean {
  if (!fs.existsSync(path.join(dataDir, LOCK_FILE))) return false;
  try {
    DataDirLock.acquire(dataDir, { writePid: false }).release();
    return false;
  } catch (e) {
    return e instanceof DataDirLockedError;
  }
}

export class DataDirLock {
  private constructor(
    private readonly dataDir: string,
    private db: Database.Database | undefined,
    /** The holder of the run before, when it did not release the lock (a crash, kill -9). */
    readonly previous: LockHolder | undefined,
    private readonly wrotePid: boolean,
  ) {}

  /** Takes the lock or throws DataDirLockedError naming the holder; never waits. */
  static acquire(dataDir: string, opts: { writePid?: boolean } = {}): DataDirLock {
    const db = new Database(path.join(dataDir, LOCK_FILE), { timeout: 0 });
    try {
      // In EXCLUSIVE locking mode the lock taken by the first write is kept until the connection closes.
      db.pragma('locking_mode = EXCLUSIVE');
      db.exec('BEGIN EXCLUSIVE');
      db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL, started_at TEXT NOT NULL)');
      db.exec('DELETE FROM holder');
      db.prepare('INSERT INTO holder VALUES (?, ?)').run(process.pid, new Date().toISOString());
      db.exec('COMMIT');
    } catch (e) {
      db.close();
      if ((e as { code?: string }).code === 'SQLITE_BUSY' || (e as { code?: string }).code === 'SQLITE_LOCKED') {
        throw new DataDirLockedError(dataDir, readLockHolder(dataDir));
      }
      throw e;
    }
    const writePid = opts.writePid ?? true;
    const previous = writePid ? readLockHolder(dataDir) : undefined;
    if (writePid) {
      const holder: LockHolder = { pid: process.pid, startedAt: new Date().toISOString(), host: os.hostname() };
      const file = path.join(dataDir, PID_FILE);
      fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(holder)}\n`, { mode: 0o600 });
      fs.renameSync(`${file}.tmp`, file);
    }
    return new DataDirLock(dataDir, db, previous, writePid);
  }

  /** Removes the pid note (when it is this process's) and releases the lock. Idempotent. */
  release(): void {
    const db = this.db;
    if (db === undefined) return;
    this.db = undefined;
    if (this.wrotePid && readLockHolder(this.dataDir)?.pid === process.pid) fs.rmSync(path.join(this.dataDir, PID_FILE), { force: true });
    db.close();
  }
}
