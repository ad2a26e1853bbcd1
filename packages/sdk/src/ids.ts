const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

// One call to the platform's CSPRNG per 4 KiB of ids: a call per id cost more
// than the rest of recording a span.
const pool = new Uint8Array(4096);
let at = pool.length;

/** `bytes` random bytes as hex, from the platform's CSPRNG (Node 20, browsers and edge runtimes all have crypto.getRandomValues). */
export function randomId(bytes = 16): string {
  if (at + bytes > pool.length) {
    globalThis.crypto.getRandomValues(pool);
    at = 0;
  }
  let s = '';
  for (let i = 0; i < bytes; i++) s += HEX[pool[at + i] as number] as string;
  at += bytes;
  return s;
}
