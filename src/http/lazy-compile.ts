import type { ValidateFunction } from 'ajv';

/**
 * Route validators and response serializers, compiled on first use instead of when the app starts.
 *
 * Fastify asks for every route's validators and serializers while it gets ready; compiling them all
 * there (ajv and fast-json-stringify generate and evaluate code per schema) was about 400 ms of a
 * production start's 1.4 s. Compiled when a route is first called, a schema costs that route's
 * first request a few milliseconds, and a schema nobody calls costs nothing. `compilePending`
 * compiles what is left: the server runs it in slices once it listens (server.ts), and a test runs it
 * whole, so a schema that cannot compile is still found at start, not by a user's first request.
 */
const pending = new Set<() => void>();

export function lazyValidator(compile: () => ValidateFunction): ValidateFunction {
  let compiled: ValidateFunction | undefined;
  const build = () => {
    compiled ??= compile();
    pending.delete(build);
    return compiled;
  };
  pending.add(build);
  const validate = ((data: unknown) => {
    const fn = compiled ?? build();
    const valid = fn(data);
    validate.errors = fn.errors;
    return valid;
  }) as ValidateFunction;
  return validate;
}

export function lazySerializer<T>(compile: () => (value: T) => string): (value: T) => string {
  let compiled: ((value: T) => string) | undefined;
  const build = () => {
    compiled ??= compile();
    pending.delete(build);
    return compiled;
  };
  pending.add(build);
  return (value) => (compiled ?? build())(value);
}

/** Compile up to `limit` schemas not compiled yet; answers how many are still waiting. */
export function compilePending(limit = Number.POSITIVE_INFINITY): number {
  for (const build of pending) {
    if (limit-- <= 0) break;
    build();
  }
  return pending.size;
}
