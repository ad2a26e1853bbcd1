import http from 'node:http';
import type express from 'express';

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle: { stack?: Layer[] };
  rawPath?: unknown;
}

/**
 * The routes an Express app registers (method and path; a mounted router's
 * under its mount path, a mounted handler as `<path>/*`), for checking the
 * route-by-credential table against what the listeners really serve. The
 * catch-all 405 and 404 handlers are not routes.
 */
export function routesOf(app: express.Express): { method: string; path: string }[] {
  return walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '');
}

function walk(stack: readonly Layer[], prefix: string): { method: string; path: string }[] {
  const out: { method: string; path: string }[] = [];
  for (const layer of stack) {
    const mount = typeof layer.rawPath === 'string' && layer.rawPath !== '/' ? layer.rawPath : '';
    if (layer.route !== undefined) {
      const methods = Object.keys(layer.route.methods).filter((m) => m !== '_all');
      // app.all(...) registers every method: those are the 405 answers, not routes.
      if (methods.length < http.METHODS.length - 1) for (const m of methods) out.push({ method: m.toUpperCase(), path: prefix + layer.route.path });
    } else if (layer.handle.stack !== undefined) out.push(...walk(layer.handle.stack, prefix + mount));
    else if (mount !== '') out.push({ method: 'GET', path: `${prefix}${mount}/*` });
  }
  return out;
}
