export { Client, type ClientOptions, type TraceContext } from './client.js';
export { BatonError, type BatonErrorCode, PermanentFailure, RetryLater } from './errors.js';
export type { ConnectionOptions } from './http.js';
export { jsonLinesToStderr, type Logger, type LogLevel } from './logging.js';
export { type VerifyPushOptions, verifyPushSignature } from './push.js';
export type { components, paths } from './schema.js';
export type { BatchEnqueuedJob, ClaimedJob, EnqueuedJob, EnqueueOptions, EnqueueRequest, FieldError, Job, JobError, JobState, Problem, ProblemCode, RelatedJob, RelatedJobList, } from './types.js';
export { type Handler, type JobContext, Worker, type WorkerJob, type WorkerOptions } from './worker.js';
