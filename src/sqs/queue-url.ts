import { isQueueName } from '../jobs/limits.js';
import { queueDoesNotExist, SqsError } from './errors.js';

/**
 * Queue URLs and ARNs. A queue URL is `<base>/<account>/<queue>`, the form the SDKs accept; the base
 * is BATON_SQS_QUEUE_URL, or the scheme and Host of the request (so a client gets URLs that reach
 * the server the way it reached it). An ARN is `arn:aws:sqs:<region>:<account>:<queue>`. A URL is
 * read by its last two path segments, whatever its host, so URLs stay valid behind a proxy.
 */
export interface SqsPlace {
  region: string;
  accountId: string;
}

export function queueUrl(base: string, place: SqsPlace, queue: string): string {
  return `${base}/${place.accountId}/${queue}`;
}

export function queueArn(place: SqsPlace, queue: string): string {
  return `arn:aws:sqs:${place.region}:${place.accountId}:${queue}`;
}

/** Queue URLs read lately (clients send the same few over and over): URL → queue name. */
const read = new Map<string, { accountId: string; queue: string }>();
const MAX_READ = 10_000;

/** The queue a QueueUrl names. Another account, or no such name, is QueueDoesNotExist. */
export function queueOfUrl(url: string, place: SqsPlace): string {
  const known = read.get(url);
  if (known && known.accountId === place.accountId) return known.queue;
  const queue = parseQueueUrl(url, place);
  if (read.size >= MAX_READ) read.clear();
  read.set(url, { accountId: place.accountId, queue });
  return queue;
}

function parseQueueUrl(url: string, place: SqsPlace): string {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    throw new SqsError('InvalidAddress', `The address ${url.slice(0, 200)} is not valid for this endpoint.`);
  }
  const [account, queue] = path.split('/').filter(Boolean).slice(-2);
  if (account !== place.accountId || queue === undefined) throw queueDoesNotExist();
  const name = decodeURIComponentSafe(queue);
  if (name === undefined || !isQueueName(name)) throw queueDoesNotExist();
  return name;
}

/** The queue an ARN names in this account (any region), or undefined. */
export function queueOfArn(arn: string, place: SqsPlace): string | undefined {
  const m = /^arn:aws[a-z-]*:sqs:[a-z0-9-]+:(\d{12}):([A-Za-z0-9._-]{1,128})$/.exec(arn);
  return m && m[1] === place.accountId ? m[2] : undefined;
}

function decodeURIComponentSafe(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}
