import { NestingError, parseJsonDocument } from '../json/nesting.js';
import { ProblemError } from './problem.js';

/**
 * Parse a JSON request body (json/nesting.ts: nesting deeper than the one document limit is refused
 * before anything is parsed; numbers a double cannot hold are kept exactly). A body too deep is a 400
 * naming `body`; text that is not JSON is 400 malformed_json.
 */
export function parseJsonBody(text: string): unknown {
  if (text.length === 0) throw malformed('the body is empty');
  try {
    return parseJsonDocument(text);
  } catch (err) {
    if (err instanceof NestingError) {
      throw new ProblemError('validation_failed', `body ${err.message}`, {
        errors: [{ field: 'body', message: err.message }],
      });
    }
    throw malformed((err as Error).message);
  }
}

const malformed = (why: string) =>
  new ProblemError('malformed_json', `request body is not valid JSON: ${why}`);
