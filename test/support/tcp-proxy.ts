import net from 'node:net';

/**
 * A TCP proxy in front of the test database that a test can cut and restore, to play a database
 * outage without stopping the shared server.
 */
export class TcpProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private constructor(
    private readonly target: { host: string; port: number },
    readonly port: number,
  ) {}

  static async start(databaseUrl: string): Promise<TcpProxy> {
    const url = new URL(databaseUrl);
    const proxy = new TcpProxy({ host: url.hostname, port: Number(url.port || 5432) }, 0);
    await proxy.listen(0);
    return proxy;
  }

  /** The same database URL, pointed at the proxy. */
  urlFor(databaseUrl: string): string {
    const url = new URL(databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.toString();
  }

  private listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const server = net.createServer((client) => {
        // A connection accepted as the proxy was being cut is emitted after cut() destroyed the others;
        // kept, it would hold server.close() (and the test) until the client's keep-alive ran out.
        if (this.server !== server) {
          client.destroy();
          return;
        }
        const upstream = net.connect(this.target.port, this.target.host);
        for (const s of [client, upstream]) {
          this.sockets.add(s);
          s.on('close', () => this.sockets.delete(s));
          s.on('error', () => {
            client.destroy();
            upstream.destroy();
          });
        }
        client.pipe(upstream).pipe(client);
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        (this as { port: number }).port = (server.address() as net.AddressInfo).port;
        this.server = server;
        resolve();
      });
    });
  }

  /** Drop every connection and refuse new ones. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Accept connections again, on the same port. */
  async restore(): Promise<void> {
    if (!this.server) await this.listen(this.port);
  }

  async close(): Promise<void> {
    await this.cut();
  }
}
