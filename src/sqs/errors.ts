import { preview } from '../json/preview.js';

/**
 * SQS errors, as the SDKs recognise them. Each has the name of its shape in the SQS model (what
 * the JSON protocol's `__type` names and the JS SDK's error class is called), the code of the query
 * protocol (what the `x-amzn-query-error` header and the XML `<Code>` carry, and what botocore
 * reports as the error code), and the HTTP status, all as the service model declares them. Errors
 * that are not shapes of the model (InvalidParameterValue, AccessDenied, ...) are AWS's common
 * errors; their shape name and code are the same.
 */
const ERRORS = {
  // Shapes of the SQS model (@aws-sdk/client-sqs, botocore's sqs/2012-11-05/service-2.json).
  QueueDoesNotExist: { code: 'AWS.SimpleQueueService.NonExistentQueue', status: 400 },
  QueueNameExists: { code: 'QueueAlreadyExists', status: 400 },
  ReceiptHandleIsInvalid: { code: 'ReceiptHandleIsInvalid', status: 404 },
  MessageNotInflight: { code: 'AWS.SimpleQueueService.MessageNotInflight', status: 400 },
  InvalidMessageContents: { code: 'InvalidMessageContents', status: 400 },
  InvalidAttributeName: { code: 'InvalidAttributeName', status: 400 },
  InvalidAttributeValue: { code: 'InvalidAttributeValue', status: 400 },
  InvalidAddress: { code: 'InvalidAddress', status: 404 },
  TooManyEntriesInBatchRequest: { code: 'AWS.SimpleQueueService.TooManyEntriesInBatchRequest', status: 400 },
  EmptyBatchRequest: { code: 'AWS.SimpleQueueService.EmptyBatchRequest', status: 400 },
  BatchEntryIdsNotDistinct: { code: 'AWS.SimpleQueueService.BatchEntryIdsNotDistinct', status: 400 },
  BatchRequestTooLong: { code: 'AWS.SimpleQueueService.BatchRequestTooLong', status: 400 },
  InvalidBatchEntryId: { code: 'AWS.SimpleQueueService.InvalidBatchEntryId', status: 400 },
  UnsupportedOperation: { code: 'AWS.SimpleQueueService.UnsupportedOperation', status: 400 },
  OverLimit: { code: 'OverLimit', status: 403 },
  ResourceNotFoundException: { code: 'ResourceNotFoundException', status: 400 },
  // AWS common errors.
  InvalidParameterValue: { code: 'InvalidParameterValue', status: 400 },
  MissingParameter: { code: 'MissingParameter', status: 400 },
  InvalidAction: { code: 'InvalidAction', status: 400 },
  SerializationException: { code: 'SerializationException', status: 400 },
  AccessDenied: { code: 'AccessDenied', status: 403 },
  MissingAuthenticationToken: { code: 'MissingAuthenticationToken', status: 403 },
  IncompleteSignature: { code: 'IncompleteSignature', status: 400 },
  InvalidClientTokenId: { code: 'InvalidClientTokenId', status: 403 },
  SignatureDoesNotMatch: { code: 'SignatureDoesNotMatch', status: 403 },
  RequestExpired: { code: 'RequestExpired', status: 400 },
  ServiceUnavailable: { code: 'ServiceUnavailable', status: 503 },
  InternalFailure: { code: 'InternalFailure', status: 500 },
} as const;

export type SqsErrorName = keyof typeof ERRORS;

/**
 * Longest message an error carries. Messages quote names and keys a client sent, which may be
 * megabytes long; the answer stays short whatever was sent (values are quoted through preview()).
 */
const MAX_MESSAGE_LENGTH = 1024;

export class SqsError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(
    readonly shape: SqsErrorName,
    message: string,
  ) {
    super(message.length > MAX_MESSAGE_LENGTH ? `${message.slice(0, MAX_MESSAGE_LENGTH - 3)}...` : message);
    this.name = 'SqsError';
    this.code = ERRORS[shape].code;
    this.status = ERRORS[shape].status;
  }

  /** Sender (the client's fault) or Receiver (ours), as the query protocol and the header say. */
  get fault(): 'Sender' | 'Receiver' {
    return this.status >= 500 ? 'Receiver' : 'Sender';
  }
}

/** The answer SQS gives for a value it refuses: `Value x for parameter P is invalid. Reason: ...`. */
export const invalidValue = (parameter: string, value: unknown, reason: string) =>
  new SqsError(
    'InvalidParameterValue',
    `Value ${preview(value)} for parameter ${parameter} is invalid. Reason: ${reason}`,
  );

export const missingParameter = (parameter: string) =>
  new SqsError('MissingParameter', `The request must contain the parameter ${parameter}.`);

export const queueDoesNotExist = () =>
  new SqsError('QueueDoesNotExist', 'The specified queue does not exist.');

export const invalidReceiptHandle = () =>
  new SqsError('ReceiptHandleIsInvalid', 'The input receipt handle is not a valid receipt handle.');
