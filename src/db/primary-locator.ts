import net from 'node:net';
import pg from 'pg';
import type { HostList, HostPort } from '../config/database-url.js';

/**
 * Which of a database URL's hosts is the primary, for every connection Baton opens (the request and
 * maintenance pools, the election's connection, the LISTEN connection): libpq's
 * target_session_attrs=read-write, which node-postgres lacks.
 *
 * Each new connection's socket asks the locator where to go. The locator answers the host it found
 * last; when it has none, it asks each host in turn, on a short connection of its own, whether it is
 * in recovery and whether it writes (what libpq checks), and keeps the first that writes. It forgets
 * the host as soon as a connection to it fails or is closed by the server: a primary that is stopped,
 * killed or demoted (a failover manager restarts it as a standby, which ends every session) is
 * looked for again by the next connection, so no connection to a node that became a standby is
 * kept. While no host writes, a connection fails at once with a connection error (SQLSTATE class 08),
 * which the API answers 503 with Retry-After, and /readyz is false.
 */
export class PrimaryLocator {
  private current: HostPort | undefined;
  private finding: Promise<HostPort> | undefined;
  /** Where the last search began, so a search after a failover starts from the next host. */
  private next = 0;

  constructor(
    private readonly list: HostList,
    /** Settings of the probe's connection (timeouts, name); the URL is each host's. */
    private readonly probeConfig: Omit<pg.ClientConfig, 'connectionString'>,
  ) {}

  /** The host new connections go to: the primary found last, or a new search. */
  resolve(): Promise<HostPort> {
    if (this.current) return Promise.resolve(this.current);
    this.finding ??= this.find().finally(() => {
      this.finding = undefined;
    });
    return this.finding;
  }

  /** A connection to this host failed or was closed by the server: look again next time. */
  lost(host: HostPort): void {
    if (this.current && this.current.host === host.host && this.current.port === host.port) {
      this.current = undefined;
    }
  }

  /** node-postgres's `stream` option: a socket that connects where the locator says. */
  socketFactory(): () => net.Socket {
    return () => new LocatedSocket(this);
  }

  private async find(): Promise<HostPort> {
    const { hosts } = this.list;
    const reasons: string[] = [];
    for (let i = 0; i < hosts.length; i++) {
      const at = (this.next + i) % hosts.length;
      const host = hosts[at]!;
      const verdict = await this.probe(host).catch((err: Error) => err.message);
      if (verdict === 'writes') {
        this.current = host;
        this.next = at;
        return host;
      }
      reasons.push(`${host.host}:${host.port} ${verdict}`);
    }
    this.next = (this.next + 1) % hosts.length;
    const err = new Error(`no database host accepts writes (${reasons.join('; ')})`);
    // 08001: sqlclient_unable_to_establish_sqlconnection, an outage (db/errors.ts): 503.
    throw Object.assign(err, { code: '08001' });
  }

  private async probe(host: HostPort): Promise<string> {
    const client = new pg.Client({ ...this.probeConfig, connectionString: this.list.urlOf(host) });
    client.on('error', () => {});
    try {
      await client.connect();
      // As text: the pools' type parsers leave booleans as PostgreSQL prints them.
      const { rows } = await client.query<{ standby: string; read_only: string }>(
        "SELECT pg_is_in_recovery()::text AS standby, current_setting('transaction_read_only') AS read_only",
      );
      const { standby, read_only } = rows[0]!;
      if (standby === 'true') return 'is a standby';
      if (this.list.target === 'read-write' && read_only === 'on') return 'is read-only';
      return 'writes';
    } finally {
      await client.end().catch(() => {});
    }
  }
}

/**
 * node-postgres calls connect(port, host) with the URL's first host; this socket asks the locator
 * instead, then connects there. Closed by the server (or failing) rather than ended by its client,
 * it tells the locator that the host may no longer be the primary.
 */
class LocatedSocket extends net.Socket {
  private target: HostPort | undefined;
  private endedByClient = false;

  constructor(private readonly locator: PrimaryLocator) {
    super();
    this.once('close', () => {
      if (this.target && !this.endedByClient) this.locator.lost(this.target);
    });
  }

  // biome-ignore lint/suspicious/noExplicitAny: net.Socket's overloads; node-postgres passes (port, host).
  override connect(..._args: any[]): this {
    this.locator.resolve().then(
      (target) => {
        this.target = target;
        if (!this.destroyed) super.connect(target.port, target.host);
      },
      (err: Error) => this.destroy(err),
    );
    return this;
  }

  // biome-ignore lint/suspicious/noExplicitAny: net.Socket's overloads.
  override end(...args: any[]): this {
    this.endedByClient = true;
    return super.end(...args);
  }
}
