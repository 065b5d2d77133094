/** A bad flag or value: one line on stderr, exit status 2, nothing written. */
export class UsageError extends Error {}
