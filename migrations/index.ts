import type { Migration } from 'kysely/migration';
import * as m0001 from './0001_initial.js';
import * as m0002 from './0002_queue_stats.js';
import * as m0003 from './0003_idempotent_ack.js';
import * as m0004 from './0004_storage_ring.js';
import * as m0005 from './0005_queue_history.js';
import * as m0006 from './0006_schedules.js';
import * as m0007 from './0007_flow_control.js';
import * as m0008 from './0008_job_meta.js';
import * as m0009 from './0009_time_limits.js';
import * as m0010 from './0010_schedule_job_fields.js';
import * as m0011 from './0011_flow_budget.js';
import * as m0012 from './0012_server_secrets.js';
import * as m0013 from './0013_unique_key_generation.js';
import * as m0014 from './0014_history_partitions.js';
import * as m0015 from './0015_receive_attempts.js';
import * as m0016 from './0016_job_dependencies.js';
import * as m0017 from './0017_job_progress.js';
import * as m0018 from './0018_failure_lists.js';
import * as m0019 from './0019_bounded_release.js';
import * as m0020 from './0020_nack_receipts.js';
import * as m0021 from './0021_message_moves.js';
import * as m0022 from './0022_failed_attempts.js';
import * as m0023 from './0023_workers.js';
import * as m0024 from './0024_push_endpoints.js';

/**
 * Every migration, in order. Imported statically (not read from the folder at run time) so the
 * same list works under tsx, vitest and the compiled dist/ build. Add new files here.
 */
export const migrations: Record<string, Migration> = {
  '0001_initial': m0001,
  '0002_queue_stats': m0002,
  '0003_idempotent_ack': m0003,
  '0004_storage_ring': m0004,
  '0005_queue_history': m0005,
  '0006_schedules': m0006,
  '0007_flow_control': m0007,
  '0008_job_meta': m0008,
  '0009_time_limits': m0009,
  '0010_schedule_job_fields': m0010,
  '0011_flow_budget': m0011,
  '0012_server_secrets': m0012,
  '0013_unique_key_generation': m0013,
  '0014_history_partitions': m0014,
  '0015_receive_attempts': m0015,
  '0016_job_dependencies': m0016,
  '0017_job_progress': m0017,
  '0018_failure_lists': m0018,
  '0019_bounded_release': m0019,
  '0020_nack_receipts': m0020,
  '0021_message_moves': m0021,
  '0022_failed_attempts': m0022,
  '0023_workers': m0023,
  '0024_push_endpoints': m0024,
};
