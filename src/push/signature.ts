import { createHmac, randomBytes } from 'node:crypto';

/**
 * How Baton signs a push (docs/push.md), as Stripe and QStash sign webhooks: an HMAC-SHA256 over the
 * delivery's Unix time, a dot and the exact body, keyed by the queue's signing secret, sent as
 * `Baton-Signature: t=<seconds>,v1=<hex>`. During a rotation both secrets sign (two v1 entries), so a
 * receiver still holding the previous secret verifies too. The time lets a receiver refuse replays
 * older than it accepts (5 minutes in the documented checks).
 */
export const SIGNATURE_HEADER = 'baton-signature';

const hmacHex = (secret: string, content: string) =>
  createHmac('sha256', secret).update(content).digest('hex');

export function signatureHeader(secrets: readonly string[], unixSeconds: number, body: string): string {
  return [`t=${unixSeconds}`, ...secrets.map((s) => `v1=${hmacHex(s, `${unixSeconds}.${body}`)}`)].join(',');
}

/** A new signing secret: 32 random bytes, recognisable by its prefix when it leaks into a paste. */
export const newSigningSecret = () => `bps_${randomBytes(32).toString('base64url')}`;
