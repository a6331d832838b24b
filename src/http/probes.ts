import type { FastifyRequest } from 'fastify';

/**
 * The endpoints that probes and scrapers call every few seconds (each route declares it in its
 * access rule, see plugins/auth.ts): they answer even while load is shed, and they are neither
 * logged nor timed per request, which would drown everything else.
 */
const PROBE_ENDPOINTS: ReadonlySet<string> = new Set(['healthz', 'readyz', 'metrics']);

export function isProbe(request: FastifyRequest): boolean {
  const access = request.routeOptions.config?.access;
  return access !== undefined && 'endpoint' in access && PROBE_ENDPOINTS.has(access.endpoint);
}
