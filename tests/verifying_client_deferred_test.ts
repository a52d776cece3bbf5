/**
 * The deferred inclusion verdict (policy `inclusion_verdict: "deferred"`):
 * an answer is released as soon as its receipt verified, while its
 * inclusion proof is still being fetched (held here until the test lets it
 * go: the answer provably did not wait for the log); the inclusion verdict
 * follows through `onVerdict` and `settle()`, and a receipt the log never
 * includes makes `settle()` reject with the typed `inclusion_failed`.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { startTlogGateway } from "./support/tlog_gateway.ts";
import {
  AciVerificationError,
  createVerifyingFetch,
  fetchTransport,
  type Verdict,
} from "../src/client/node.ts";

const policy = {
  allow_dev_evidence: true,
  inclusion: "required",
  inclusion_verdict: "deferred",
} as const;

Deno.test("deferred inclusion: answers (whole and streamed) are released before their proofs, verdicts follow in settle()", async () => {
  const gw = await startTestGateway();
  const verdicts: Verdict[] = [];
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let proofRequests = 0;
  const f = createVerifyingFetch({
    baseURL: gw.baseURL,
    policy,
    // The inclusion proofs wait for the test: the answers must not.
    transport: fetchTransport(async (input, init) => {
      if (String(input).endsWith("/inclusion")) {
        proofRequests++;
        await held;
      }
      return await fetch(input, init);
    }),
    onVerdict: (v) => verdicts.push(v),
  });
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, fetch: f, maxRetries: 0 });
    const body = { model: "demo/echo", messages: [{ role: "user" as const, content: "defer me" }] };
    const whole = await client.chat.completions.create(body).withResponse();
    assert.match(whole.data.choices[0].message.content ?? "", /defer me/);
    const names = (whole.response.headers.get("x-aci-verified") ?? "").split(",");
    assert.ok(names.includes("log-inclusion-deferred"), names.join());
    assert.ok(!names.includes("log-inclusion") && names.includes("body-hashes"), names.join());
    let streamed = "";
    for await (const c of await client.chat.completions.create({ ...body, stream: true })) {
      streamed += c.choices[0]?.delta?.content ?? "";
    }
    assert.match(streamed, /defer me/);
    // Both answers delivered and verified while no proof can have been served (all are held).
    assert.deepEqual(verdicts.map((v) => [v.phase, v.ok]), [["answer", true], ["answer", true]]);

    release();
    const late = await f.settle();
    assert.equal(late.length, 2);
    for (const v of late) {
      assert.equal(v.phase, "inclusion");
      assert.ok(v.ok, JSON.stringify(v.checks));
      assert.deepEqual(v.verified, ["log-inclusion"]);
      assert.match(v.checks[0].detail, /signed by the attested log key/);
    }
    assert.deepEqual(
      new Set(late.map((v) => v.receiptId)),
      new Set(verdicts.slice(0, 2).map((v) => v.receiptId)),
    );
    assert.equal(verdicts.length, 4);
    assert.ok(proofRequests >= 2, `${proofRequests} proof requests`);
    assert.deepEqual(await f.settle(), [], "nothing left to settle");
  } finally {
    release();
    f.close();
    await gw.close();
  }
});

Deno.test("deferred inclusion: a receipt missing from the log makes settle() reject with inclusion_failed", async () => {
  const gw = startTlogGateway({ omitFromLog: true });
  const verdicts: Verdict[] = [];
  const f = createVerifyingFetch({
    baseURL: gw.baseURL,
    policy,
    onVerdict: (v) => verdicts.push(v),
  });
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: "sk-test", fetch: f, maxRetries: 0 });
    const r = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "q" }],
    });
    assert.equal(r.choices[0].message.content, "logged answer");
    await assert.rejects(
      f.settle(),
      (e) => e instanceof AciVerificationError && e.code === "inclusion_failed",
    );
    assert.deepEqual(verdicts.map((v) => [v.phase, v.ok]), [["answer", true], [
      "inclusion",
      false,
    ]]);
    assert.equal(verdicts[1].error?.code, "inclusion_failed");
  } finally {
    f.close();
    await gw.close();
  }
});
