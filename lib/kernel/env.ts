/** The process environment as configuration reads it: names to values, nothing else assumed. */
export type Env = Readonly<Record<string, string | undefined>>;
