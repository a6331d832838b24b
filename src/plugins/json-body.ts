import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { parseJsonBody } from '../http/json-body.js';

/**
 * Request bodies are JSON and only JSON. Fastify's own JSON parser is replaced by one that refuses
 * deep nesting before parsing and keeps numbers exactly (http/json-body.ts); its text/plain parser
 * is removed, so any other content type is a 415 saying what to send.
 */
export default fp(
  async function jsonBody(app: FastifyInstance) {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
      try {
        done(null, parseJsonBody(body as string));
      } catch (err) {
        done(err as Error, undefined);
      }
    });
  },
  { name: 'json-body', fastify: '5.x' },
);
