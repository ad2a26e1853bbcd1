import fs from 'node:fs';

/**
 * Free space on the filesystem of DATA_DIR, read at most once a second (a
 * statfs per request would cost more than it tells), against a reserve: below
 * it, batches get 503 and /readyz turns not-ready before the disk is full, so
 * the span store keeps room to checkpoint and drain the write log once it can,
 * instead of every freed byte being taken by new 202s.
 */
export class DiskSpace {
  private checkedAt = 0;
  private free = Number.POSITIVE_INFINITY;

  constructor(
    private readonly dir: string,
    private readonly reserveBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Bytes free for this process on the filesystem (cached for a second). */
  freeBytes(): number {
    const t = this.now();
    if (t - this.checkedAt >= 1000) {
      this.checkedAt = t;
      try {
        const st = fs.statfsSync(this.dir);
        this.free = st.bavail * st.bsize;
      } catch {
        // An unreadable folder is reported by the write log and the store themselves.
        this.free = Number.POSITIVE_INFINITY;
      }
    }
    return this.free;
  }

  /** Why batches must wait, when the free space is under the reserve. */
  problem(): string | undefined {
    if (this.reserveBytes <= 0) return undefined;
    const free = this.freeBytes();
    if (free >= this.reserveBytes) return undefined;
    const mib = (n: number) => `${Math.floor(n / 1048576)} MiB`;
    return (
      `the disk under ${this.dir} is nearly full (${mib(free)} free, DISK_RESERVE_BYTES keeps ${mib(this.reserveBytes)}): ` +
      'free space; batches are accepted again once there is room'
    );
  }
}
