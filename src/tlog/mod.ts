/** The transparency log's front door: sequencing, tiles and witnesses. */

export { createTransparencyLog, type TransparencyLog } from "./log.ts";
