export { Client } from './client.js';
export { BatonError, PermanentFailure, RetryLater } from './errors.js';
export { jsonLinesToStderr } from './logging.js';
export { verifyPushSignature } from './push.js';
export { Worker } from './worker.js';
