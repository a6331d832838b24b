import type { Migration } from 'kysely/migration';
import * as m0001 from './0001_initial.js';
import * as m0002 from './0002_queue_stats.js';
import * as m0003 from './0003_idempotent_ack.js';
import * as m0009 from './0009_job_meta.js';

/**
 * Every migration, in order. Imported statically (not read from the folder at run time) so the
 * same list works under tsx, vitest and the compiled dist/ build. Add new files here.
 */
export const migrations: Record<string, Migration> = {
  '0001_initial': m0001,
  '0002_queue_stats': m0002,
  '0003_idempotent_ack': m0003,
  '0009_job_meta': m0009,
};
