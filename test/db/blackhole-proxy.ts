import { type AddressInfo, connect, createServer, type Socket } from 'node:net';

export interface BlackholeProxy {
  /** `url` with its host and port replaced by the proxy's. */
  through(url: string): string;
  /**
   * From now on as a host that stopped answering (blackholed, hung, on the other side of a
   * partition): new connections are accepted and then hear nothing, and nothing they send goes
   * on. Connections already open are `cut` (as after a restart or a failover) or `frozen`: what
   * either side sends is held, as in flight on a network that no longer delivers it.
   */
  blackhole(existing: 'cut' | 'freeze'): void;
  /** Forwards again, what was held first: frozen connections and those accepted meanwhile. */
  forward(): void;
  close(): Promise<void>;
}

/** A TCP proxy in front of `target` (e.g. PostgreSQL) that can be switched to a blackhole. */
export async function startBlackholeProxy(target: { host: string; port: number }): Promise<BlackholeProxy> {
  let blackholed = false;
  /** Every open connection and its way on, once it has one. */
  const links = new Map<Socket, Socket | undefined>();

  const relay = (from: Socket, to: Socket) => {
    // By hand, not pipe(): pipe resumes a socket paused to freeze it once its destination drains.
    from.on('data', (chunk) => to.write(chunk));
    from.on('end', () => to.end());
    from.on('close', () => to.destroy());
  };
  const link = (client: Socket) => {
    const upstream = connect(target.port, target.host);
    upstream.on('error', () => undefined);
    links.set(client, upstream);
    relay(client, upstream);
    relay(upstream, client);
  };

  const server = createServer((client) => {
    client.on('error', () => undefined);
    client.on('close', () => links.delete(client));
    links.set(client, undefined);
    // Accepted (the client's connect succeeds) but not read: what it sends waits unanswered.
    if (!blackholed) link(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    through(url) {
      const proxied = new URL(url);
      proxied.hostname = '127.0.0.1';
      proxied.port = String(port);
      return proxied.toString();
    },
    blackhole(existing) {
      blackholed = true;
      for (const [client, upstream] of links) {
        if (!upstream) continue;
        if (existing === 'cut') {
          client.destroy();
          upstream.destroy();
        } else {
          client.pause();
          upstream.pause();
        }
      }
    },
    forward() {
      blackholed = false;
      for (const [client, upstream] of links) {
        if (upstream) {
          client.resume();
          upstream.resume();
        } else {
          link(client);
        }
      }
    },
    async close() {
      for (const [client, upstream] of links) {
        client.destroy();
        upstream?.destroy();
      }
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
