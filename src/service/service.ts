import { JobUseCases, type ServiceDeps } from './jobs.js';
import { LeaseUseCases } from './leases.js';
import { QueueUseCases } from './queues.js';

/**
 * The use cases of one replica, below every protocol: routes/ and sqs/ translate a request into
 * these calls and their results into an answer, and nothing else. Built once per replica
 * (plugins/service.ts), so the group-commit batchers it holds are the replica's only ones.
 */
export interface Service {
  jobs: JobUseCases;
  leases: LeaseUseCases;
  queues: QueueUseCases;
}

export function createService(deps: ServiceDeps): Service {
  const jobs = new JobUseCases(deps);
  return { jobs, leases: new LeaseUseCases(deps, jobs), queues: new QueueUseCases(deps) };
}

export type { ServiceDeps };
