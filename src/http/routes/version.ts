import type { FastifyInstance } from 'fastify';

/** The build a broker runs: the same values as the queen_build_info metric. */
export interface BuildInfo {
  version: string;
  commit: string;
}

/**
 * GET /api/v1/version: the running build as JSON, for `queenctl version`
 * (the metric says the same, but reading it means parsing Prometheus text).
 * It sits under /api, so it takes the token like every /api route.
 */
export function registerVersion(app: FastifyInstance, build: BuildInfo): void {
  const body = { version: build.version, commit: build.commit };
  app.get('/api/v1/version', async () => body);
}
