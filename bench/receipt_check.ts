/**
 * The bench's receipt check (#27): the row once compared a count of stored
 * receipts with a count of 200s that left out the verifying client's
 * requests, and printed MISMATCH for a run where every 200 had its receipt.
 * Now every answer of the loads names its receipt (`x-receipt-id`), each is
 * looked up in the store after the gateway stopped, and the counts include
 * every client of the run.
 */

/**
 * Every 200 of the loads named a receipt that is in the store (`missing` counts those
 * that are not, or named none), and the store holds one receipt per answer counted.
 */
export function receiptVerdict(
  stored: number,
  answered: number,
  missing: number,
  checked: number,
): string {
  if (missing > 0) {
    return `**MISMATCH**: ${missing} of ${checked} checked 200s without a stored receipt`;
  }
  if (stored !== answered) {
    return `**MISMATCH**: ${stored - answered} receipts more than answers counted ` +
      `(all ${checked} checked 200s have theirs)`;
  }
  return `every response has its receipt (${checked} checked by id)`;
}
