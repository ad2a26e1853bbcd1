/** 32 hex characters from the platform's CSPRNG (Node 20, browsers and edge runtimes all have crypto.getRandomValues). */
export function randomId(bytes = 16): string {
  const b = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(b);
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s;
}
