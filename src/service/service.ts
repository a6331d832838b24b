import { BulkActions } from './bulk.js';
import { JobUseCases, type ServiceDeps } from './jobs.js';
import { LeaseUseCases } from './leases.js';
import { MoveUseCases } from './moves.js';
import { PushUseCases } from './push.js';
import { QueueUseCases } from './queues.js';
import { ScheduleUseCases } from './schedules.js';
import { WorkerUseCases } from './workers.js';

/**
 * The use cases of one replica, below every protocol: routes/ and sqs/ translate a request into
 * these calls and their results into an answer, and nothing else. Built once per replica
 * (plugins/service.ts), so the group-commit batchers it holds are the replica's only ones.
 */
export interface Service {
  jobs: JobUseCases;
  leases: LeaseUseCases;
  queues: QueueUseCases;
  schedules: ScheduleUseCases;
  /** Dead-letter queues' jobs sent back (SQS message move tasks). */
  moves: MoveUseCases;
  /** Workers that announce themselves. */
  workers: WorkerUseCases;
  /** Push queues' endpoints (the delivering is push/dispatcher.ts's). */
  push: PushUseCases;
  /** One action on many jobs an operator picked, with a result per job. */
  bulk: BulkActions;
}

export function createService(deps: ServiceDeps): Service {
  const workers = new WorkerUseCases(deps);
  const jobs = new JobUseCases(deps, workers);
  const leases = new LeaseUseCases(deps, jobs);
  const queues = new QueueUseCases(deps);
  return {
    jobs,
    leases,
    queues,
    schedules: new ScheduleUseCases(deps, jobs),
    moves: new MoveUseCases(deps),
    workers,
    push: new PushUseCases(deps),
    bulk: new BulkActions(deps, leases, queues),
  };
}

export type { ServiceDeps };
