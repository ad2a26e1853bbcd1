import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const src = path.dirname(fileURLToPath(import.meta.url));

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [p] : [];
  });
}

describe('the published package', () => {
  it('has no runtime dependency and imports nothing but its own modules (no node: either, for edge runtimes)', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(src, '../package.json'), 'utf8')) as Record<string, unknown>;
    expect(pkg['dependencies']).toBeUndefined();
    expect(pkg['peerDependencies']).toBeUndefined();
    const files = sources(src);
    expect(files.length).toBeGreaterThan(5);
    for (const f of files) {
      const text = fs.readFileSync(f, 'utf8');
      const specifiers = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)].map(
        (m) => m[1] ?? m[2],
      );
      for (const s of specifiers) expect({ file: path.relative(src, f), s }).toEqual({ file: path.relative(src, f), s: expect.stringMatching(/^\.\.?\//) });
    }
  });
});
