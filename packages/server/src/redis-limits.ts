/**
 * Rate limits and monthly quota shared by every replica through Redis
 * (REDIS_URL=redis://...).
 *
 * Redis unreachable: fail closed. Every consume/check answers 503
 * (ServiceUnavailableError, code TI_ERR_UNAVAILABLE, Retry-After: 1) within
 * about a second instead of letting traffic through unmetered: a per-replica
 * fallback would multiply each key's rate by the number of replicas and let
 * quotas run over exactly when ops are busy with an outage, and a client that
 * retries after Retry-After loses nothing. The client is built to fail fast
 * (no offline queue, 1 s connect and command timeouts) and reconnects on its
 * own, so service resumes with Redis without a restart.
 *
 * Quota usage: the key store (PostgreSQL in a scale-out deployment) is the
 * durable record, and counts each batch once by its fingerprint, whichever
 * replica adds it; Redis holds a copy so the per-request check costs no SQL.
 * `add` adds to the key store first (one atomic upsert that returns the new
 * total) and then raises the Redis counter to that total with one atomic
 * script. Raising to the durable total rather than INCRBY-ing the batch keeps
 * the copy exact even when a restore races an add (INCRBY would count that
 * batch twice) and heals by itself after a Redis write was lost. `check`
 * reads Redis; a missing key (Redis restarted empty, or the month's first
 * check) is restored from the key store before comparing, so a Redis restart
 * never resets usage to zero. Once the key store holds a batch, a failure to
 * update Redis does not fail the request (the spans are already accepted and
 * a retry would count them twice): the next add raises the copy again.
 */
import { Redis } from 'ioredis';
import { RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { QuotaExceededError, ServiceUnavailableError, isTiError } from '@trace-ingest/shared/errors';
import { utcMonth } from '@trace-ingest/shared/ids';
import type { ControlStore, UsageBatchCount } from '@trace-ingest/store/control-store-types';
import type { QuotaCounter } from './quota.js';
import { PerRateLimiter } from './rate-limit.js';

/** A month's counter outlives its month by a few days, then Redis drops it. */
const USAGE_TTL_SECONDS = 40 * 24 * 3600;
const RETRY_AFTER_SECONDS = 1;

/** An ioredis client that errors at once while Redis is away instead of queueing requests. */
export function createRedisClient(url: string, opts: { onError?: (e: Error) => void } = {}): Redis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 1000,
    commandTimeout: 1000,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
  });
  // Without a listener ioredis prints every failed reconnect; callers count them instead.
  client.on('error', opts.onError ?? (() => undefined));
  return client;
}

/** Resolves once the client can take commands; with the offline queue off, a server should wait for this at start. */
export async function waitForRedis(client: Redis, timeoutMs = 2000): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      reject(new ServiceUnavailableError(`Redis did not become ready within ${timeoutMs} ms (REDIS_URL)`, RETRY_AFTER_SECONDS));
    }, timeoutMs);
    const onReady = (): void => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', onReady);
  });
}

/** Rejects unless the client is connected and Redis answers a PING within the command timeout. */
export async function pingRedis(client: Redis): Promise<void> {
  if (client.status !== 'ready') throw new Error(`Redis is not connected (${client.status})`);
  await client.ping();
}

function redisUnavailable(cause: unknown): ServiceUnavailableError {
  return new ServiceUnavailableError('rate limit and quota service (Redis) is unreachable; retry shortly', RETRY_AFTER_SECONDS, cause);
}

/** Holds a client the object either made (and so ends) or was lent (and leaves to its owner). */
class RedisHandle {
  readonly client: Redis;
  private readonly owned: boolean;
  private closed = false;

  constructor(redis: Redis | string) {
    this.owned = typeof redis === 'string';
    this.client = typeof redis === 'string' ? createRedisClient(redis) : redis;
  }

  async close(): Promise<void> {
    if (this.closed || !this.owned) return;
    this.closed = true;
    if (this.client.status === 'ready') {
      try {
        await this.client.quit();
        return;
      } catch {
        // Lost while quitting: nothing left to flush.
      }
    }
    this.client.disconnect();
  }
}

export interface RedisLimitOptions {
  /** Prefix of every Redis key; replicas that share limits use the same one, tests a unique one. */
  keyPrefix?: string;
}

/**
 * Per-key requests-per-second shared by all replicas: one fixed 1-second
 * window per key in Redis, so N rps means N across the fleet.
 */
export class RedisRateLimiter extends PerRateLimiter {
  private readonly handle: RedisHandle;
  private readonly prefix: string;

  /** With a URL the limiter owns its connection; a lent client stays open on close(). */
  constructor(redis: Redis | string, opts: RedisLimitOptions = {}) {
    super();
    this.handle = new RedisHandle(redis);
    this.prefix = opts.keyPrefix ?? 'ti';
  }

  protected create(rps: number): RateLimiterAbstract {
    return new RateLimiterRedis({
      storeClient: this.handle.client,
      useRedisPackage: false,
      // Refuse at once while disconnected rather than wait for a reconnect.
      rejectIfRedisNotReady: true,
      points: rps,
      duration: 1,
      keyPrefix: `${this.prefix}:rps${rps}`,
    });
  }

  override async consume(keyId: string, rps: number): Promise<void> {
    try {
      await super.consume(keyId, rps);
    } catch (e) {
      if (isTiError(e)) throw e;
      throw redisUnavailable(e);
    }
  }

  /** Resolves once Redis takes commands; a server awaits it at start so its first requests are not refused. */
  async ready(timeoutMs?: number): Promise<void> {
    await waitForRedis(this.handle.client, timeoutMs);
  }

  /** Rejects unless Redis answers now (for /readyz). */
  async ping(): Promise<void> {
    await pingRedis(this.handle.client);
  }

  override async close(): Promise<void> {
    await super.close();
    await this.handle.close();
  }
}

interface RaiseCommand {
  /** Sets the counter to `value` unless it already holds at least that; returns what it holds afterwards. */
  tiRaiseTo(key: string, value: number, ttlSeconds: number): Promise<number>;
}

const RAISE_TO_LUA = `
local cur = tonumber(redis.call('GET', KEYS[1]) or '-1')
local want = tonumber(ARGV[1])
if want > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  return want
end
return cur
`;

export interface RedisQuotaOptions extends RedisLimitOptions {
  /** Called when Redis could not be updated after the key store was; the copy heals on the next add. */
  onRedisError?: (e: unknown) => void;
}

/** The per-org monthly quota shared by all replicas; see the top of this file. */
export class RedisQuotaCounter implements QuotaCounter {
  private readonly handle: RedisHandle;
  private readonly redis: Redis & RaiseCommand;
  private readonly prefix: string;
  private readonly onRedisError: (e: unknown) => void;

  /** With a URL the counter owns its connection; a lent client stays open on close(). */
  constructor(
    redis: Redis | string,
    private readonly keys: Pick<ControlStore, 'getMonthUsage' | 'addMonthUsageOnce'>,
    opts: RedisQuotaOptions = {},
  ) {
    this.handle = new RedisHandle(redis);
    this.handle.client.defineCommand('tiRaiseTo', { numberOfKeys: 1, lua: RAISE_TO_LUA });
    this.redis = this.handle.client as Redis & RaiseCommand;
    this.prefix = opts.keyPrefix ?? 'ti';
    this.onRedisError = opts.onRedisError ?? (() => undefined);
  }

  /** The Redis key of an org's month, e.g. `ti:usage:org_x:2026-11`. */
  usageKey(orgId: string, month: string): string {
    return `${this.prefix}:usage:${orgId}:${month}`;
  }

  async check(orgId: string, monthlySpans: number, now: number): Promise<void> {
    const month = utcMonth(now);
    const key = this.usageKey(orgId, month);
    let cached: string | null;
    try {
      cached = await this.redis.get(key);
    } catch (e) {
      throw redisUnavailable(e);
    }
    let used: number;
    if (cached !== null) {
      used = Number(cached);
    } else {
      const durable = await this.keys.getMonthUsage(orgId, month);
      try {
        used = Number(await this.redis.tiRaiseTo(key, durable, USAGE_TTL_SECONDS));
      } catch (e) {
        throw redisUnavailable(e);
      }
    }
    if (used >= monthlySpans) throw new QuotaExceededError(monthlySpans);
  }

  async add(orgId: string, batches: readonly UsageBatchCount[], now: number): Promise<void> {
    const month = utcMonth(now);
    // A batch another replica already added is recognised by the key store, in the same transaction as the count.
    const total = await this.keys.addMonthUsageOnce(orgId, month, batches, Date.now());
    try {
      await this.redis.tiRaiseTo(this.usageKey(orgId, month), total, USAGE_TTL_SECONDS);
    } catch (e) {
      this.onRedisError(e);
    }
  }

  /** Resolves once Redis takes commands; a server awaits it at start so its first requests are not refused. */
  async ready(timeoutMs?: number): Promise<void> {
    await waitForRedis(this.handle.client, timeoutMs);
  }

  /** Rejects unless Redis answers now (for /readyz). */
  async ping(): Promise<void> {
    await pingRedis(this.handle.client);
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}
