/**
 * The path parameters a route captured (`:name` → decoded segment). Its own
 * module so handlers name it without importing the router that dispatches
 * to them.
 */
export type Params = Record<string, string>;
