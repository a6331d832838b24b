import type { components } from './schema.js';
/** The shapes of Baton's API, named as openapi/openapi.json names them (generated into schema.ts). */
type Schemas = components['schemas'];
/** A job as GET /v1/jobs/{id} answers it: state, attempts, result, progress, errors, ... */
export type Job = Schemas['Job'];
export type JobState = Schemas['JobState'];
/** A job handed out by a claim, under a lease: what a worker's handler gets. */
export type ClaimedJob = Schemas['ClaimedJob'];
/** A job as an enqueue answers it. */
export type EnqueuedJob = Schemas['EnqueuedJob'];
/** A job as a batch enqueue answers it (`created`: false when a key matched an existing job). */
export type BatchEnqueuedJob = Schemas['BatchEnqueuedJob'];
/** One job to enqueue: its payload and every option (priority, delay_ms, depends_on, ...). */
export type EnqueueRequest = Schemas['EnqueueRequest'];
/** Every option of an enqueue but the payload, as the API names them. */
export type EnqueueOptions = Omit<EnqueueRequest, 'payload'>;
/** A parent or a child of a job. */
export type RelatedJob = Schemas['RelatedJob'];
/** A page of parents or children; pass next_cursor as cursor for the next page. */
export type RelatedJobList = Schemas['RelatedJobList'];
/** One failed attempt of a job. */
export type JobError = Schemas['JobError'];
/** An RFC 9457 problem details body, as Baton answers every error. */
export type Problem = Schemas['Problem'];
export type ProblemCode = Schemas['ProblemCode'];
/** One invalid field of a refused request. */
export type FieldError = Schemas['FieldError'];
/** A job's states once it has finished: it will not change again. */
export declare const FINISHED_STATES: readonly JobState[];
export {};
