import { createHmac, timingSafeEqual } from 'node:crypto';
import { isJobId, isQueueName } from '../jobs/limits.js';

/**
 * A receipt handle is the SQS name for a lease: it carries the job id and the lease token of one
 * claim, and the queue it was received from, base64url-encoded behind a version byte and followed
 * by a 16-byte tag: HMAC-SHA-256 of all that under a secret every replica reads from the database
 * (baton.server_secrets, migration 0012), cut to 128 bits.
 *
 * Unforgeable twice over. The tag: only the server can make one, so a handle whose bytes were changed
 * in any way (another queue, another id, another token) or made up is ReceiptHandleIsInvalid before
 * anything is looked up. The lease token: 122 random bits minted by PostgreSQL and handed out once,
 * inside this handle, to the one receiver, so even a handle naming a job and a token that were never
 * received together would match nothing. And whatever a handle says, the statements it reaches are
 * scoped in SQL to the queue of the request (jobs/lease-outcome.ts's ScopedId), which the caller's key
 * was allowed: a leaked handle of another tenant's queue acts on nothing.
 *
 * Clients must treat it as opaque; the layout may change (the version byte says which). Handles of
 * version 1 (a CRC-32 in place of the tag) are no longer accepted: deleting with one is
 * ReceiptHandleIsInvalid, and its message comes back when its visibility timeout ends.
 */
const VERSION = 2;
const TOKEN_BYTES = 16;
const ID_BYTES = 8;
const TAG_BYTES = 16;
/** The secret's name in baton.server_secrets. */
export const RECEIPT_HANDLE_SECRET = 'sqs_receipt_handles';

export interface Lease {
  queue: string;
  id: string;
  leaseToken: string;
}

export class ReceiptHandles {
  constructor(private readonly key: Buffer) {}

  encode(lease: Lease): string {
    const token = Buffer.from(lease.leaseToken.replace(/-/g, ''), 'hex');
    const id = Buffer.alloc(ID_BYTES);
    id.writeBigUInt64BE(BigInt(lease.id));
    const body = Buffer.concat([Buffer.of(VERSION), token, id, Buffer.from(lease.queue, 'utf8')]);
    return Buffer.concat([body, this.tag(body)]).toString('base64url');
  }

  /** The lease a handle names, or undefined when it is not a handle this server issued. */
  decode(handle: string): Lease | undefined {
    if (handle.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(handle)) return undefined;
    const bytes = Buffer.from(handle, 'base64url');
    // One spelling per handle (base64 decoding forgives stray trailing bits).
    if (bytes.toString('base64url') !== handle) return undefined;
    const min = 1 + TOKEN_BYTES + ID_BYTES + 1 + TAG_BYTES;
    if (bytes.length < min || bytes[0] !== VERSION) return undefined;
    const body = bytes.subarray(0, bytes.length - TAG_BYTES);
    if (!timingSafeEqual(this.tag(body), bytes.subarray(bytes.length - TAG_BYTES))) return undefined;
    const hex = body.subarray(1, 1 + TOKEN_BYTES).toString('hex');
    const leaseToken = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    const id = body.readBigUInt64BE(1 + TOKEN_BYTES).toString();
    const queue = body.subarray(1 + TOKEN_BYTES + ID_BYTES).toString('utf8');
    if (!isJobId(id) || !isQueueName(queue)) return undefined;
    return { queue, id, leaseToken };
  }

  private tag(body: Buffer): Buffer {
    return createHmac('sha256', this.key).update(body).digest().subarray(0, TAG_BYTES);
  }
}
