/** The development upstreams' front door. */

export { startDevUpstreams } from "./dev_upstreams.ts";
