import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { requestLogController } from './http/request-log.js';
import { buildSerializer } from './http/serialization.js';
import { buildValidator } from './http/validation.js';
import { createLogger } from './logger.js';
import auth from './plugins/auth.js';
import closedQuery from './plugins/closed-query.js';
import database from './plugins/database.js';
import exactPaths from './plugins/exact-paths.js';
import idleMemory from './plugins/idle-memory.js';
import jsonBody from './plugins/json-body.js';
import loadShedding from './plugins/load-shedding.js';
import maintenance from './plugins/maintenance.js';
import metrics from './plugins/metrics.js';
import openapi from './plugins/openapi.js';
import problemHandler, { clientErrorHandler, frameworkErrors } from './plugins/problem-handler.js';
import push from './plugins/push.js';
import releaser from './plugins/releaser.js';
import schedulesFile from './plugins/schedules-file.js';
import service from './plugins/service.js';
import sqs from './plugins/sqs.js';
import tracing from './plugins/tracing.js';
import ui from './plugins/ui.js';
import unusedConnections from './plugins/unused-connections.js';
import wake from './plugins/wake.js';
import bulk from './routes/bulk.js';
import health from './routes/health.js';
import jobSearch from './routes/job-search.js';
import jobs from './routes/jobs.js';
import overview from './routes/overview.js';
import queueGroups from './routes/queue-groups.js';
import queueHistory from './routes/queue-history.js';
import queueJobs from './routes/queue-jobs.js';
import queueMoves from './routes/queue-moves.js';
import queuePush from './routes/queue-push.js';
import queues from './routes/queues.js';
import schedules from './routes/schedules.js';
import whoami from './routes/whoami.js';
import workers from './routes/workers.js';
import { loadStartupInputs, type StartupInputs } from './startup-inputs.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    /** True from the moment close() begins: readiness turns 503 and long-polls return at once. */
    shuttingDown: boolean;
  }
}

export interface AppOptions {
  config: Config;
  /** The database to use (config.databaseUrl, or the embedded server's URL). */
  databaseUrl: string;
  /**
   * API keys, SQS key pairs and the schedules file, as server.ts loaded them before touching the
   * database. Absent, buildApp loads them from `config` (and throws the same ConfigError).
   */
  inputs?: StartupInputs;
  logger?: Logger;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the app (plugins, routes, error handler) without listening; see server.ts for that. */
export type BatonApp = FastifyInstance<
  RawServerDefault,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export async function buildApp(opts: AppOptions): Promise<BatonApp> {
  const { config } = opts;
  const { apiKeys, sqsCredentials, fileSchedules } = opts.inputs ?? loadStartupInputs(config);
  const app = Fastify({
    loggerInstance: (opts.logger ?? createLogger(config)) as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    // A slow client (a body trickled a byte at a time) gets 408 instead of holding a connection for
    // as long as it likes; idle keep-alive connections close; the connection count is capped.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    // Node checks request timeouts on this interval (30 s by default): check every second instead.
    http: { headersTimeout: config.requestTimeoutMs, connectionsCheckingInterval: 1000 },
    frameworkErrors,
    clientErrorHandler,
    // Honour a caller's X-Request-Id when it is sane, so one id follows a request across services.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    logController: requestLogController(),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 256 },
    schemaController: { compilersFactory: { buildValidator, buildSerializer } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.decorate('config', config);
  app.decorate('shuttingDown', false);
  app.addHook('preClose', async () => {
    app.shuttingDown = true;
  });
  // The per-request hooks are callback-style, not async: an async hook costs a promise and a
  // microtask turn on every request (docs/benchmarks.md, "What was tried and what it gave", row
  // "Callback-style request hooks").
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    // A request that began before shutdown (a waiting claim, say) ends its keep-alive connection
    // with its answer: the server's close ends only the connections idle when it starts, and one
    // that went idle after would hold the process open until the keep-alive timeout.
    if (app.shuttingDown) reply.header('connection', 'close');
    done(null, payload);
  });

  app.server.maxConnections = config.maxConnections;

  await app.register(unusedConnections);
  await app.register(problemHandler);
  await app.register(exactPaths);
  await app.register(closedQuery);
  await app.register(jsonBody);
  await app.register(database, { url: opts.databaseUrl, config });
  // Before any route, so that it sees every route's access declaration (see plugins/auth.ts).
  await app.register(auth, { apiKeys });
  await app.register(openapi);
  await app.register(ui, { keysRequired: apiKeys.length > 0 });
  await app.register(metrics);
  await app.register(tracing);
  await app.register(loadShedding);
  await app.register(wake, { url: opts.databaseUrl });
  await app.register(service);
  await app.register(maintenance);
  await app.register(releaser);
  await app.register(push);
  await app.register(schedulesFile, { schedules: fileSchedules });
  await app.register(idleMemory);
  await app.register(health);
  await app.register(queueJobs);
  await app.register(jobs);
  await app.register(jobSearch);
  await app.register(bulk);
  await app.register(queues);
  await app.register(queueHistory);
  await app.register(queueMoves);
  await app.register(queuePush);
  await app.register(queueGroups);
  await app.register(whoami);
  await app.register(workers);
  await app.register(overview);
  await app.register(schedules);
  // The SQS-compatible endpoint (docs/sqs.md): POST / and POST /{account}/{queue}, hidden from OpenAPI.
  if (config.sqs) await app.register(sqs, { apiKeys, credentials: sqsCredentials });
  return app;
}
