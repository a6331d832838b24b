import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/** The query of a route that takes none: any parameter is unknown. */
const NO_QUERY = { type: 'object', properties: {}, additionalProperties: false } as const;

interface RouteSchema {
  hide?: boolean;
  querystring?: { additionalProperties?: unknown };
}

/**
 * Every documented route refuses a query parameter it does not know, as bodies refuse unknown
 * fields: `?wait=5000` for `wait_ms`, or a filter a route does not have, is a 400 naming it rather
 * than a 200 that ignored what the caller asked. A route without a query schema gets an empty one;
 * a query schema that would let unknown parameters through stops start-up. Routes hidden from the
 * API document (the SQS endpoint, whose protocol is its own; the dashboard's and the document's
 * files) are left as they are.
 */
export default fp(
  async function closedQuery(app: FastifyInstance) {
    app.addHook('onRoute', (route) => {
      const schema = route.schema as RouteSchema | undefined;
      if (!schema || schema.hide) return;
      if (schema.querystring === undefined) {
        route.schema = { ...schema, querystring: NO_QUERY };
      } else if (schema.querystring.additionalProperties !== false) {
        throw new Error(
          `${[route.method].flat().join(',')} ${route.url}: its query schema must refuse unknown parameters`,
        );
      }
    });
  },
  { name: 'closed-query', fastify: '5.x' },
);
