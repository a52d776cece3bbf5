import assert from "node:assert/strict";
import { createNoteSigner } from "../aci/note_signer.ts";
import { leafHash, nodeHash } from "../aci/merkle.ts";
import { inclusionCheck } from "./inclusion.ts";
import { receiptEntry, verifyCheckpoint } from "./tlog.ts";

const ORIGIN = "gw.example/v1/aci/log";
const b64 = (b: Uint8Array) => btoa(String.fromCharCode(...b));

function signed(body: string, seed = new Uint8Array(32).fill(7)) {
  const signer = createNoteSigner(ORIGIN, seed);
  return { note: `${body}\n${signer.sign(body)}`, key: signer.publicKey };
}

Deno.test("verifyCheckpoint: the attested key's signature under the origin's name", () => {
  const root = new Uint8Array(32).fill(1);
  const body = `${ORIGIN}\n5\n${b64(root)}\n`;
  const { note, key } = signed(body);
  const cp = verifyCheckpoint(note, key);
  assert.ok(typeof cp !== "string", String(cp));
  assert.equal(cp.size, 5);
  const other = signed(body, new Uint8Array(32).fill(8)).key;
  assert.match(String(verifyCheckpoint(note, other)), /no valid signature/);
  assert.match(
    String(verifyCheckpoint(note.replace("\n5\n", "\n6\n"), key)),
    /no valid signature|malformed/,
  );
  assert.match(String(verifyCheckpoint("not a note", key)), /well-formed/);
});

Deno.test("inclusionCheck: a two-leaf tree proves the receipt, a wrong index or size does not", () => {
  const receipt = { api_version: "aci/1", receipt_id: "rcpt-1" };
  const mine = leafHash(receiptEntry(receipt));
  const other = leafHash(new TextEncoder().encode("other"));
  const root = nodeHash(other, mine);
  const { note, key } = signed(`${ORIGIN}\n2\n${b64(root)}\n`);
  const proof = {
    origin: ORIGIN,
    leaf_index: 1,
    tree_size: 2,
    inclusion_proof: [b64(other)],
    checkpoint: note,
  };
  assert.ok(inclusionCheck(receipt, proof, key).ok);
  assert.ok(!inclusionCheck(receipt, { ...proof, leaf_index: 0 }, key).ok);
  assert.ok(!inclusionCheck(receipt, { ...proof, tree_size: 3 }, key).ok);
  assert.ok(!inclusionCheck({ ...receipt, receipt_id: "rcpt-2" }, proof, key).ok);
  assert.ok(!inclusionCheck(receipt, { ...proof, origin: "elsewhere" }, key).ok);
});
