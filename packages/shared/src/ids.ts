import { createHash, randomBytes, randomUUID } from 'node:crypto';

/**
 * API keys and ids. A key is `ti_` + 43 base64url characters (32 random
 * bytes); only its SHA-256 is stored, and its first 12 characters (the
 * prefix) are what ops see afterwards.
 */

export const API_KEY_PREFIX = 'ti_';
export const KEY_PREFIX_LENGTH = 12;
const KEY_PATTERN = /^ti_[A-Za-z0-9_-]{20,200}$/;

export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** True when `key` has the shape of a key; a cheap check before hashing. */
export function isWellFormedKey(key: string): boolean {
  return KEY_PATTERN.test(key);
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function keyPrefix(key: string): string {
  return key.slice(0, KEY_PREFIX_LENGTH);
}

export function newId(kind: 'org' | 'plan' | 'key' | 'price' | 'audit' | 'catalog'): string {
  return `${kind}_${randomUUID().replaceAll('-', '')}`;
}

/** UTC calendar month of an epoch-ms instant as YYYY-MM. */
export function utcMonth(ms: number): string {
  return new Date(ms).toISOString().slice(0, 7);
}
