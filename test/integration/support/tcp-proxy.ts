import net from 'node:net';
import { onTestFinished } from 'vitest';

/**
 * A TCP proxy to a real server that can stop passing bytes, both ways, on
 * every connection at once: what a frozen (SIGSTOPped) or partitioned server
 * looks like to its clients, connections open and nothing answered.
 */
export interface TcpProxy {
  port: number;
  pause(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let paused = false;
  const waiting: (() => void)[] = [];
  const sockets = new Set<net.Socket>();
  /** Bytes from `from` reach `to` unless paused; held ones go on resume, in order. */
  const pipe = (from: net.Socket, to: net.Socket) => {
    from.on('data', (chunk: Buffer) => {
      if (paused) waiting.push(() => to.write(chunk));
      else to.write(chunk);
    });
    from.on('close', () => to.destroy());
    from.on('error', () => to.destroy());
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    client.on('close', () => sockets.delete(client));
    upstream.on('close', () => sockets.delete(upstream));
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxy: TcpProxy = {
    port: (server.address() as net.AddressInfo).port,
    pause: () => {
      paused = true;
    },
    resume: () => {
      paused = false;
      for (const w of waiting.splice(0)) w();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  onTestFinished(() => proxy.close());
  return proxy;
}
