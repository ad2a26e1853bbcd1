import { describe, expect, it } from 'vitest';
import { randomId } from './ids.js';

describe('randomId', () => {
  it('gives hex ids of the asked length that do not repeat across pool refills', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const id = randomId(i % 2 === 0 ? 16 : 8);
      expect(id).toMatch(i % 2 === 0 ? /^[0-9a-f]{32}$/ : /^[0-9a-f]{16}$/);
      seen.add(id);
    }
    expect(seen.size).toBe(20_000);
  });
});
