import { missingParameter, SqsError } from './errors.js';
import { type Input, objectList } from './input.js';

/** SQS's batch rules: 1 to 10 entries, each with a distinct Id of letters, digits, "-" and "_". */
export const MAX_BATCH_ENTRIES = 10;
const ENTRY_ID = /^[A-Za-z0-9_-]{1,80}$/;

export interface Entry {
  id: string;
  input: Input;
}

export function batchEntries(input: Input, action: string): Entry[] {
  if (input.Entries === undefined || input.Entries === null) throw missingParameter('Entries');
  const entries = objectList(input, 'Entries');
  if (entries.length === 0) {
    throw new SqsError(
      'EmptyBatchRequest',
      `There should be at least one ${action}RequestEntry in the request.`,
    );
  }
  if (entries.length > MAX_BATCH_ENTRIES) {
    throw new SqsError(
      'TooManyEntriesInBatchRequest',
      `Maximum number of entries per request are ${MAX_BATCH_ENTRIES}. You have sent ${entries.length}.`,
    );
  }
  const seen = new Set<string>();
  return entries.map((entry) => {
    const id = entry.Id;
    if (typeof id !== 'string' || !ENTRY_ID.test(id)) {
      throw new SqsError(
        'InvalidBatchEntryId',
        'A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.',
      );
    }
    if (seen.has(id)) throw new SqsError('BatchEntryIdsNotDistinct', `Id ${id} repeated.`);
    seen.add(id);
    return { id, input: entry };
  });
}

/** A failed entry of a batch answer. */
export function failedEntry(id: string, err: SqsError) {
  return { Id: id, SenderFault: err.fault === 'Sender', Code: err.code, Message: err.message };
}

/**
 * Split items into rounds in which no job appears twice. Baton's batch writes answer per job id,
 * while SQS lets a batch name one message twice (the same handle, or a stale and a fresh one).
 */
export function distinctRounds<T extends { id: string }>(items: T[]): T[][] {
  const rounds: T[][] = [];
  for (const item of items) {
    const round = rounds.find((r) => !r.some((other) => other.id === item.id));
    if (round) round.push(item);
    else rounds.push([item]);
  }
  return rounds;
}
