import { describe, expect, it } from 'vitest';
import { ConfigError } from './errors.js';
import { loadConfig } from './config.js';

describe("DuckDB's memory settings", () => {
  it('take sizes, and 0 for no kept block memory', () => {
    const c = loadConfig({ DUCKDB_MEMORY_LIMIT: '2GiB', DUCKDB_BLOCK_ALLOCATOR_MEMORY: '512MB' }, '/tmp');
    expect([c.DUCKDB_MEMORY_LIMIT, c.DUCKDB_BLOCK_ALLOCATOR_MEMORY]).toEqual(['2GiB', '512MB']);
    expect(loadConfig({ DUCKDB_BLOCK_ALLOCATOR_MEMORY: '0' }, '/tmp').DUCKDB_BLOCK_ALLOCATOR_MEMORY).toBe('0');
    expect(loadConfig({}, '/tmp').DUCKDB_BLOCK_ALLOCATOR_MEMORY).toBeUndefined();
  });

  it('refuse a percentage, which DuckDB would take for some settings and then abort the process on', () => {
    expect(() => loadConfig({ DUCKDB_BLOCK_ALLOCATOR_MEMORY: '25%' }, '/tmp')).toThrow(ConfigError);
    expect(() => loadConfig({ DUCKDB_BLOCK_ALLOCATOR_MEMORY: '25%' }, '/tmp')).toThrow(
      'DUCKDB_BLOCK_ALLOCATOR_MEMORY: must be a size such as 256MiB, or 0 for none (got "25%")',
    );
    expect(() => loadConfig({ DUCKDB_MEMORY_LIMIT: '0' }, '/tmp')).toThrow('DUCKDB_MEMORY_LIMIT: must be a size such as 512MB or 2GiB');
  });
});
