/** The default: one JSON line per event on stderr, info and above (claimed and acked are debug). */
export const jsonLinesToStderr = (level, event, fields) => {
    if (level === 'debug')
        return;
    process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, event, ...fields })}\n`);
};
/** An error as a log field: its message (and code, for a BatonError). */
export function describeError(err) {
    if (err instanceof Error)
        return err.message || err.name;
    return String(err);
}
