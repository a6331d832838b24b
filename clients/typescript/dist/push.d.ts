export interface VerifyPushOptions {
    /** How far the signature's time may be from now, in seconds (a replay older than this is refused). Default 300. */
    toleranceSeconds?: number;
    now?: Date;
}
/**
 * Whether a push from Baton is genuine (docs/push.md): `header` is the request's Baton-Signature,
 * `body` the raw body as received (before any JSON parsing), `secret` the queue's signing secret, or
 * several while you move from one to the next. True when a v1 signature matches one of them and its
 * time is within the tolerance.
 *
 *   if (!verifyPushSignature(req.headers['baton-signature'], rawBody, process.env.BATON_PUSH_SECRET!))
 *     return res.writeHead(401).end();
 */
export declare function verifyPushSignature(header: string | string[] | null | undefined, body: string | Uint8Array, secret: string | readonly string[], opts?: VerifyPushOptions): boolean;
