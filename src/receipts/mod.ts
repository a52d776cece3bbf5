/** Receipts' front door: the recorder, refusals and the receipt service. */

export { ReceiptRecorder } from "./recorder.ts";
export { responseIdOf, StreamIdFinder } from "./response_id.ts";
export { createReceiptService, type ReceiptService } from "./service.ts";
