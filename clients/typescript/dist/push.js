import { createHmac, timingSafeEqual } from 'node:crypto';
/**
 * Whether a push from Baton is genuine (docs/push.md): `header` is the request's Baton-Signature,
 * `body` the raw body as received (before any JSON parsing), `secret` the queue's signing secret, or
 * several while you move from one to the next. True when a v1 signature matches one of them and its
 * time is within the tolerance.
 *
 *   if (!verifyPushSignature(req.headers['baton-signature'], rawBody, process.env.BATON_PUSH_SECRET!))
 *     return res.writeHead(401).end();
 */
export function verifyPushSignature(header, body, secret, opts = {}) {
    const value = Array.isArray(header) ? header[0] : header;
    if (typeof value !== 'string')
        return false;
    const parts = value.split(',').map((p) => {
        const at = p.indexOf('=');
        return [p.slice(0, at).trim(), p.slice(at + 1).trim()];
    });
    const t = parts.find(([k]) => k === 't')?.[1];
    if (t === undefined || !/^\d+$/.test(t))
        return false;
    const now = (opts.now ?? new Date()).getTime() / 1000;
    if (Math.abs(now - Number(t)) > (opts.toleranceSeconds ?? 300))
        return false;
    const signed = Buffer.concat([
        Buffer.from(`${t}.`),
        typeof body === 'string' ? Buffer.from(body) : Buffer.from(body),
    ]);
    const given = parts.filter(([k]) => k === 'v1').map(([, v]) => Buffer.from(v));
    return (typeof secret === 'string' ? [secret] : secret).some((s) => {
        const expected = Buffer.from(createHmac('sha256', s).update(signed).digest('hex'));
        return given.some((g) => g.length === expected.length && timingSafeEqual(g, expected));
    });
}
