/**
 * XML answers of the query protocol, written from the same result object the JSON protocol sends.
 * The shapes follow the query-protocol service model (botocore 1.29's sqs/2012-11-05): lists are
 * flattened (one element per item, named for the item), maps are flattened Name/Value (or Key/Value)
 * pairs, and every answer is wrapped in `<{Action}Response>` with `<{Action}Result>` and
 * `<ResponseMetadata>`.
 */
export const XML_NAMESPACE = 'http://queue.amazonaws.com/doc/2012-11-05/';

/** The element of one item of each list member. */
const LIST_ITEMS: Record<string, string> = {
  QueueUrls: 'QueueUrl',
  queueUrls: 'QueueUrl',
  Messages: 'Message',
  Failed: 'BatchResultErrorEntry',
  Results: 'ListMessageMoveTasksResultEntry',
};

/** Map members: the element of one pair, and the names of its key and value elements. */
const MAPS: Record<string, [string, string, string]> = {
  Attributes: ['Attribute', 'Name', 'Value'],
  Tags: ['Tag', 'Key', 'Value'],
  MessageAttributes: ['MessageAttribute', 'Name', 'Value'],
};

/**
 * Actions whose answer has no result: every other answer carries `<{Action}Result>`, empty or not
 * (botocore's query parser fails on a missing one, say for a receive that found no message).
 */
const NO_RESULT = new Set([
  'ChangeMessageVisibility',
  'DeleteMessage',
  'DeleteQueue',
  'PurgeQueue',
  'SetQueueAttributes',
  'TagQueue',
  'UntagQueue',
]);

export function xmlAnswer(action: string, result: Record<string, unknown>, requestId: string): string {
  const body = Object.entries(result)
    .map(([name, value]) => member(action, name, value))
    .join('');
  const resultElement = NO_RESULT.has(action) ? '' : `<${action}Result>${body}</${action}Result>`;
  return (
    `<?xml version="1.0"?><${action}Response xmlns="${XML_NAMESPACE}">${resultElement}` +
    `<ResponseMetadata><RequestId>${xmlText(requestId)}</RequestId></ResponseMetadata></${action}Response>`
  );
}

export function xmlError(fault: string, code: string, message: string, requestId: string): string {
  return (
    `<?xml version="1.0"?><ErrorResponse xmlns="${XML_NAMESPACE}"><Error><Type>${fault}</Type>` +
    `<Code>${xmlText(code)}</Code><Message>${xmlText(message)}</Message><Detail/></Error>` +
    `<RequestId>${xmlText(requestId)}</RequestId></ErrorResponse>`
  );
}

function member(action: string, name: string, value: unknown): string {
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) {
    const item = LIST_ITEMS[name] ?? (name === 'Successful' ? `${action}ResultEntry` : name);
    return value.map((v) => element(action, item, v)).join('');
  }
  const map = MAPS[name];
  if (map && typeof value === 'object') {
    const [pair, key, val] = map;
    return Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `<${pair}><${key}>${xmlText(k)}</${key}>${element(action, val, v)}</${pair}>`)
      .join('');
  }
  return element(action, name, value);
}

function element(action: string, name: string, value: unknown): string {
  if (typeof value === 'object' && value !== null) {
    const inner = Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => member(action, k, v))
      .join('');
    return `<${name}>${inner}</${name}>`;
  }
  return `<${name}>${xmlText(String(value))}</${name}>`;
}

/** Characters XML 1.0 cannot hold. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const NOT_XML = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g;

/**
 * Text as XML character data. A carriage return is written as a reference, because an XML parser
 * turns a literal one (and CR LF) into a line feed, and a message body must arrive byte for byte
 * (its MD5 is checked). Characters XML 1.0 cannot carry at all (other C0 controls) never reach here
 * in a body (SQS's character rules refuse them); in an error message they are dropped.
 */
function xmlText(text: string): string {
  return text
    .replace(NOT_XML, '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/\r/g, '&#xD;');
}
