/**
 * The only reader of `process.env`.
 *
 * Every setting is declared once in config/settings.ts with its variable name, default, unit, a
 * one-line description and its parser (config/parsers.ts). `loadConfig()` parses and validates all of
 * them, reports every bad value at once (each message names its variable), and returns a frozen
 * object of plain values.
 *
 * Config imports nothing from the rest of src/ but the leaf duration-limits.ts, so it is in no import
 * cycle. What only the domain can check (API keys, SQS key pairs, the schedules file) stays here as
 * JSON text or a path; src/startup-inputs.ts reads and checks it at start-up.
 */

import type { Parser, Setting } from './config/parsers.js';
import { settings } from './config/settings.js';

export type { OpenEndpoint } from './config/parsers.js';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Settings = typeof settings;
type ValueOf<S> = S extends { parse: Parser<infer T> } ? T : never;

export type Config = {
  readonly [K in keyof Settings]: Settings[K] extends { optional: true }
    ? ValueOf<Settings[K]> | undefined
    : ValueOf<Settings[K]>;
};

/**
 * Parse the environment into a frozen Config. Throws ConfigError naming every bad variable.
 * `env` defaults to the process environment; tests pass their own object.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(settings) as [string, Setting<unknown>][]) {
    const raw = env[s.env];
    if (raw === undefined || raw === '') {
      out[key] = s.default;
      continue;
    }
    try {
      out[key] = s.parse(raw);
    } catch (err) {
      problems.push(`${s.env} ${(err as Error).message}`);
    }
  }
  // The rule queues/queue-settings.ts's backoffProblem applies to a queue's own values.
  if (problems.length === 0 && (out.backoffMaxMs as number) < (out.backoffBaseMs as number)) {
    problems.push('BATON_BACKOFF_MAX_MS must be at least BATON_BACKOFF_BASE_MS');
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(out) as Config;
}
