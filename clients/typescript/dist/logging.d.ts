export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
/**
 * Where the library's events go: (level, event, fields). Events: started, claimed, acked, nacked,
 * lease_lost, dropped, renew_failed, claim_failed, ack_failed, stopping, gave_back, drained,
 * request_retry. Replace it to send them to your logger; `() => {}` silences them.
 */
export type Logger = (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
/** The default: one JSON line per event on stderr, info and above (claimed and acked are debug). */
export declare const jsonLinesToStderr: Logger;
/** An error as a log field: its message (and code, for a BatonError). */
export declare function describeError(err: unknown): string;
