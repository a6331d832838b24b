import fastJsonStringify, { type Options } from 'fast-json-stringify';
import { lazySerializer } from './lazy-compile.js';

type Serialize = (value: unknown) => string;

/**
 * Fastify's serializer factory (schemaController.compilersFactory.buildSerializer): what Fastify's
 * own (@fastify/fast-json-stringify-compiler) does, a fast-json-stringify function per response
 * schema with the shared schemas (app.addSchema) resolvable by $ref, with each function kept for the
 * whole process per set of shared schemas. Building one checks its schema and generates code; every
 * app built in this process (replicas in one test file, the files of a test worker) declares the
 * same schemas, and building them again cost each app build about half a second of CPU. Each is
 * built when first used (lazy-compile.ts).
 */
export function buildSerializer(
  externals: unknown,
  options: unknown,
): (route: { schema?: unknown }) => Serialize {
  const externalSchemas = (externals ?? {}) as Record<string, unknown>;
  const serializerOpts = (options ?? {}) as Options;
  const key = JSON.stringify([externalSchemas, serializerOpts]);
  let built = serializersBySchemas.get(key);
  if (!built) {
    if (serializersBySchemas.size >= SCHEMA_SETS_KEPT) serializersBySchemas.clear();
    built = new Map();
    serializersBySchemas.set(key, built);
  }
  const cache = built;
  return ({ schema }) => {
    // By the schema's text: Fastify hands each app its own copy of a route's response schemas.
    const text = JSON.stringify(schema);
    let serialize = cache.get(text);
    if (!serialize) {
      // A response schema that is itself a shared one must not be listed twice (fast-json-stringify
      // refuses a duplicate $id).
      const id = (schema as { $id?: string }).$id;
      const shared = id && id in externalSchemas ? withoutKey(externalSchemas, id) : externalSchemas;
      serialize = lazySerializer(
        () =>
          fastJsonStringify(schema as object, {
            ...serializerOpts,
            schema: shared as Options['schema'],
          }) as Serialize,
      );
      cache.set(text, serialize);
    }
    return serialize;
  };
}

function withoutKey(schemas: Record<string, unknown>, key: string): Record<string, unknown> {
  const { [key]: _, ...rest } = schemas;
  return rest;
}

const serializersBySchemas = new Map<string, Map<string, Serialize>>();
/** A process builds apps with one set of shared schemas; a bound in case one ever varies. */
const SCHEMA_SETS_KEPT = 4;
