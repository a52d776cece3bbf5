/** The store's front door: KV group commits, transient-failure retries and the KV wrappers. */

export { COLLATERAL_BLOBS, getBlob, putBlob } from "./blobs.ts";
export { applyWrites, type BorrowedWrites, GroupCommitter, type KvWrite } from "./group_commit.ts";
export { framed } from "./kv_writes.ts";
export {
  deferredConsistent,
  type DeferredSnapshot,
  DeferredSums,
  type DeferredTotals,
  deferredTotals,
  foldDeferred,
  readDeferred,
  readWithDeferred,
} from "./deferred_sums.ts";
export { backoffMs, isTransientKvError, retryTransient, sleep } from "./transient.ts";
