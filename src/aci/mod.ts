/**
 * The primitives' front door: ACI data and crypto (hashing, JCS, keysets, receipts' signing
 * input, statements, notes, hex) as the rest of the server uses them. The client library and the
 * /verify page's script import the files they need directly (their browser builds swap files).
 */

export { concatBytes, ownBytes } from "./bytes.ts";
export { DEV_TEE_TYPE, devQuote, isDevQuote, parseDevQuote } from "./dev_quote.ts";
export { lowerHexValue, writeLowerHex } from "./hex_digits.ts";
export { BodyHasher, sha256Hex, sha256Parts, sha256Prefixed } from "./digest.ts";
export {
  ed25519RawPublicKey,
  ed25519Sign,
  ed25519Verify,
  generateEd25519PrivateKey,
} from "./ed25519.ts";
export {
  ethereumAddress,
  ethereumAddressBytes,
  recoverEip191Address,
  toChecksumAddress,
} from "./ethereum.ts";
export { bytesEqual, bytesToHex, hexToBytes, isLowerHex, parseHex } from "./hex.ts";
export { jcs, jcsBytes } from "./jcs.ts";
export { type E2eePublicKey, keysetDigest, type WorkloadKeyset } from "./keyset.ts";
export {
  legacyAddressBytes,
  legacyNonceBytes,
  legacyReportData,
  legacySigningAddress,
  type LegacySigningAlgo,
  legacySigningPublicKey,
  signatureEnvelope,
} from "./legacy.ts";
export {
  keysetEntry,
  receiptEntry,
  receiptEntryOfDigest,
  receiptLeafHash,
  sessionEntry,
} from "./log_entry.ts";
export {
  consistencyProof,
  emptyRoot,
  HASH_BYTES,
  inclusionProof,
  leafHash,
  nodeHash,
  parseTilePath,
  type SubtreeReader,
  subtreeReaderOver,
  TILE_HEIGHT,
  TILE_WIDTH,
  tileExistsFor,
  type TileRef,
  tilesAtLevel,
  verifyConsistency,
  verifyInclusion,
} from "./merkle.ts";
export {
  b64,
  checkpointBody,
  keyId,
  parseCheckpointBody,
  parseNote,
  parseVerifierKey,
  SIG_COSIGNATURE,
  SIG_ED25519,
  unb64,
  verifyNote,
} from "./note.ts";
export { createNoteSigner, type NoteSigner } from "./note_signer.ts";
export {
  newReceiptId,
  type Receipt,
  type ReceiptEvent,
  signReceipt,
  signReceiptJcs,
} from "./receipt.ts";
export { buildKeyset, generateWorkloadKeys, NOTE_KEY_ALGO, type WorkloadKeys } from "./signer.ts";
export { reportData, reportDataSlot } from "./statement.ts";
