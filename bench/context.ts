import type pg from 'pg';
import { BatonServer } from './baton-server.js';
import { adminPool, DATABASES, databaseUrl } from './databases.js';
import { HttpClient } from './load/http-client.js';
import { startOtlpSink } from './otlp-sink.js';
import { GraphilePeer } from './peers/graphile-worker.js';
import { PgBossPeer } from './peers/pg-boss.js';
import type { Sizes } from './sizes.js';

/**
 * What a scenario gets: sizes, the Baton server (one process for the whole run, started on first
 * use) with an HTTP client, and the peers (prepared on first use). Every system has its own
 * database on the same PostgreSQL.
 */

export const BATON_PORT = Number(process.env.BENCH_PORT ?? 18_480);

export class BenchContext {
  private batonServer: BatonServer | undefined;
  private batonClient: HttpClient | undefined;
  private batonAdmin: pg.Pool | undefined;
  private graphilePeer: GraphilePeer | undefined;
  private pgBossPeer: PgBossPeer | undefined;
  private readonly extraServers = new Set<BatonServer>();
  private traced:
    | { server: BatonServer; client: HttpClient; sink: Awaited<ReturnType<typeof startOtlpSink>> }
    | undefined;

  constructor(
    readonly sizes: Sizes,
    readonly quick: boolean,
    readonly log: (message: string) => void,
    /** Write a V8 CPU profile of the main Baton server here when it stops (`--profile`). */
    readonly cpuProfileDir?: string,
  ) {}

  /** Only these systems (lower-case name prefixes, `--systems baton,graphile`); all when unset. */
  systems: string[] | undefined;

  /**
   * Round r's order of systems: as given on even rounds, reversed on odd ones (A B, B A, ...), so
   * drift on this shared machine does not always favour the same system.
   */
  order(round: number, systems: string[]): string[] {
    const wanted = systems.filter((s) => this.includes(s));
    return round % 2 === 0 ? wanted : [...wanted].reverse();
  }

  /** Whether this run measures `system` (see `systems`). */
  includes(system: string): boolean {
    return !this.systems || this.systems.some((p) => system.toLowerCase().startsWith(p.toLowerCase()));
  }

  async baton(): Promise<{ server: BatonServer; client: HttpClient; admin: pg.Pool }> {
    if (!this.batonServer) {
      const server = new BatonServer({
        databaseUrl: databaseUrl(DATABASES.baton),
        port: BATON_PORT,
        // The leader's duties (re-arm, promote, prune, GC) would run on their own timers in the middle
        // of measurements, and the prune scenario measures the prune itself; so the measured server
        // serves the API only. Their steady-state cost is a few small statements per tick.
        env: { BATON_MAINTENANCE: 'false' },
        ...(this.cpuProfileDir ? { cpuProfileDir: this.cpuProfileDir } : {}),
      });
      await server.start();
      this.batonServer = server;
      this.batonClient = new HttpClient(server.url);
      this.batonAdmin = adminPool(DATABASES.baton);
    }
    return { server: this.batonServer, client: this.batonClient!, admin: this.batonAdmin! };
  }

  /**
   * A second Baton server, started on first use, configured as the main one but with tracing on: its
   * spans go to an OTLP sink in this process, which answers as a collector would (otlp-sink.ts). The
   * same database: a traced run is measured like any Baton run, beside the untraced one.
   */
  async batonTraced(): Promise<{
    server: BatonServer;
    client: HttpClient;
    admin: pg.Pool;
    spans: () => number;
  }> {
    const { admin } = await this.baton();
    if (!this.traced) {
      const sink = await startOtlpSink();
      const server = new BatonServer({
        databaseUrl: databaseUrl(DATABASES.baton),
        port: BATON_PORT + 7,
        env: { BATON_MAINTENANCE: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: sink.url },
      });
      await server.start();
      this.traced = { server, client: new HttpClient(server.url), sink };
    }
    const { server, client, sink } = this.traced;
    return { server, client, admin, spans: () => sink.spans };
  }

  /** Restart the main server (e.g. to measure a fresh process's memory). */
  async restartBaton(): Promise<void> {
    this.batonClient?.close();
    await this.batonServer?.stop();
    this.batonServer = undefined;
    await this.batonAdmin?.end();
    this.batonAdmin = undefined;
    await this.baton();
  }

  /** Another Baton process against the same database (scenario 6's second replica). */
  async extraBaton(port: number, env: Record<string, string> = {}): Promise<BatonServer> {
    const server = new BatonServer({ databaseUrl: databaseUrl(DATABASES.baton), port, env });
    await server.start();
    this.extraServers.add(server);
    return server;
  }

  async stopExtra(server: BatonServer): Promise<void> {
    await server.stop();
    this.extraServers.delete(server);
  }

  async graphile(): Promise<GraphilePeer> {
    if (!this.graphilePeer) {
      const peer = new GraphilePeer();
      await peer.prepare();
      this.graphilePeer = peer;
    }
    return this.graphilePeer;
  }

  async pgBoss(): Promise<PgBossPeer> {
    if (!this.pgBossPeer) {
      const peer = new PgBossPeer();
      await peer.prepare();
      this.pgBossPeer = peer;
    }
    return this.pgBossPeer;
  }

  async close(): Promise<void> {
    const errors: unknown[] = [];
    const attempt = async (f: () => Promise<unknown> | undefined) => {
      try {
        await f();
      } catch (err) {
        errors.push(err);
      }
    };
    for (const s of this.extraServers) await attempt(() => s.stop());
    if (this.traced) {
      const { server, client, sink } = this.traced;
      client.close();
      await attempt(() => server.stop());
      await attempt(() => sink.close());
    }
    this.batonClient?.close();
    await attempt(() => this.batonServer?.stop());
    await attempt(() => this.batonAdmin?.end());
    await attempt(() => this.graphilePeer?.close());
    await attempt(() => this.pgBossPeer?.close());
    if (errors.length > 0) console.error('errors while closing:', errors);
  }
}
