import { crc32 } from 'node:zlib';
import { isJobId, isQueueName } from '../jobs/limits.js';

/**
 * A receipt handle is the SQS name for a lease: it carries the job id and the lease token of one
 * claim, and the queue it was received from, base64url-encoded behind a version byte and followed
 * by a 4-byte checksum (CRC-32).
 *
 * Unforgeable: the lease token is 122 random bits minted by PostgreSQL (gen_random_uuid()) and handed
 * out once, inside this handle, to the one receiver, so a handle that names a job and a token that
 * were never received together matches nothing, exactly like a stale one. The checksum is not a
 * secret; it only tells a damaged or made-up handle (ReceiptHandleIsInvalid) from a stale one (which
 * SQS answers as a success on delete). A handle works only on the queue it was received from.
 *
 * Clients must treat it as opaque; the layout may change (the version byte says which).
 */
const VERSION = 1;
const TOKEN_BYTES = 16;
const ID_BYTES = 8;
const CHECK_BYTES = 4;

export interface Lease {
  queue: string;
  id: string;
  leaseToken: string;
}

export function encodeReceiptHandle(lease: Lease): string {
  const token = Buffer.from(lease.leaseToken.replace(/-/g, ''), 'hex');
  const id = Buffer.alloc(ID_BYTES);
  id.writeBigUInt64BE(BigInt(lease.id));
  const body = Buffer.concat([Buffer.of(VERSION), token, id, Buffer.from(lease.queue, 'utf8')]);
  return Buffer.concat([body, checksum(body)]).toString('base64url');
}

/** The lease a handle names, or undefined when it is not a handle this server could have issued. */
export function decodeReceiptHandle(handle: string): Lease | undefined {
  if (handle.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(handle)) return undefined;
  const bytes = Buffer.from(handle, 'base64url');
  // One spelling per handle (base64 decoding forgives stray trailing bits).
  if (bytes.toString('base64url') !== handle) return undefined;
  const min = 1 + TOKEN_BYTES + ID_BYTES + 1 + CHECK_BYTES;
  if (bytes.length < min || bytes[0] !== VERSION) return undefined;
  const body = bytes.subarray(0, bytes.length - CHECK_BYTES);
  if (!checksum(body).equals(bytes.subarray(bytes.length - CHECK_BYTES))) return undefined;
  const hex = body.subarray(1, 1 + TOKEN_BYTES).toString('hex');
  const leaseToken = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  const id = body.readBigUInt64BE(1 + TOKEN_BYTES).toString();
  const queue = body.subarray(1 + TOKEN_BYTES + ID_BYTES).toString('utf8');
  if (!isJobId(id) || !isQueueName(queue)) return undefined;
  return { queue, id, leaseToken };
}

/** CRC-32: it only has to catch damage and invention (every flipped bit, say), not an attacker. */
function checksum(body: Buffer): Buffer {
  const check = Buffer.alloc(CHECK_BYTES);
  check.writeUInt32BE(crc32(body));
  return check;
}
