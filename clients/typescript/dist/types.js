/** A job's states once it has finished: it will not change again. */
export const FINISHED_STATES = ['completed', 'dead', 'cancelled'];
