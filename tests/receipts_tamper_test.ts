/**
 * Tampering: one changed byte in a body, an event, the keyset digest or the
 * signature makes receipt verification fail — in the library, in an
 * independent re-computation, and in the `main.ts verify` command run as a
 * subprocess, which names the failing check.
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import {
  fetchReceipt,
  fetchReport,
  independentFailures,
  type Json,
  keysetOf,
  postRaw,
} from "./support/receipt_check.ts";
import { verifyReceipt } from "../src/verify/receipt.ts";
import { taskArgs } from "./support/task_line.ts";

const ROOT = new URL("../", import.meta.url).pathname;

interface CliRun {
  code: number;
  lines: string[];
}

async function runVerifyCli(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...await taskArgs("verify"), ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", ...env },
  }).output();
  const lines = new TextDecoder().decode(out.stdout).split("\n").filter((l) => l !== "");
  return { code: out.code, lines };
}

function failedChecks(run: CliRun): string[] {
  return run.lines.filter((l) => l.startsWith("FAIL ")).map((l) => l.split(" ")[1]).sort();
}

/** A copy of `bytes` with the byte at `i` changed. */
function flipByte(bytes: Uint8Array, i: number): Uint8Array {
  const out = bytes.slice();
  out[i] = out[i] === 0x41 ? 0x42 : 0x41;
  return out;
}

function flipHexChar(hex: string, i: number): string {
  return hex.slice(0, i) + (hex[i] === "0" ? "1" : "0") + hex.slice(i + 1);
}

Deno.test("tampering with a body, an event, the digest or the signature fails, and the CLI says which check", async () => {
  const gw = await startTestGateway();
  const dir = await Deno.makeTempDir({ prefix: "receipts_tamper_" });
  try {
    const { report, nonce } = await fetchReport(gw.url);
    const keyset = keysetOf(report);
    const files = async (stream: boolean) => {
      const ex = await postRaw(gw.url, "/v1/chat/completions", {
        model: "demo/echo",
        stream,
        messages: [{ role: "user", content: "tamper with me" }],
      }, gw.apiKey);
      assert.equal(ex.status, 200);
      const receipt = (await fetchReceipt(gw.url, ex.receiptId!, gw.apiKey)).body as Json;
      return { ex, receipt };
    };
    const plain = await files(false);
    const streamed = await files(true);
    const { ex, receipt } = plain;
    const events = receipt.event_log as Json[];

    const variants: { name: string; receipt: Json; request: Uint8Array; response: Uint8Array }[] = [
      { name: "intact", receipt, request: ex.request, response: ex.response },
      {
        name: "intact-stream",
        receipt: streamed.receipt,
        request: streamed.ex.request,
        response: streamed.ex.response,
      },
      {
        name: "response-byte",
        receipt,
        request: ex.request,
        response: flipByte(ex.response, 10),
      },
      {
        name: "stream-byte",
        receipt: streamed.receipt,
        request: streamed.ex.request,
        // The framing is covered too: change the final terminator's last newline.
        response: flipByte(streamed.ex.response, streamed.ex.response.length - 1),
      },
      {
        name: "request-byte",
        receipt,
        request: flipByte(ex.request, 3),
        response: ex.response,
      },
      {
        name: "event",
        receipt: {
          ...receipt,
          event_log: events.map((e) =>
            e.type === "route.selected" ? { ...e, target_route_id: `${e.target_route_id}-x` } : e
          ),
        },
        request: ex.request,
        response: ex.response,
      },
      {
        name: "event-hash",
        receipt: {
          ...receipt,
          event_log: events.map((e) =>
            e.type === "response.returned"
              ? { ...e, body_hash: flipHexChar(String(e.body_hash), 20) }
              : e
          ),
        },
        request: ex.request,
        response: ex.response,
      },
      {
        name: "digest",
        receipt: {
          ...receipt,
          workload_keyset_digest: flipHexChar(String(receipt.workload_keyset_digest), 12),
        },
        request: ex.request,
        response: ex.response,
      },
      {
        name: "signature",
        receipt: { ...receipt, signature: flipHexChar(String(receipt.signature), 5) },
        request: ex.request,
        response: ex.response,
      },
    ];
    const expected: Record<string, string[]> = {
      "intact": [],
      "intact-stream": [],
      "response-byte": ["receipt.response_body_hash"],
      "stream-byte": ["receipt.response_body_hash"],
      "request-byte": ["receipt.request_body_hash"],
      "event": ["receipt.signature"],
      // The recorded hash no longer matches the bytes, nor the signature.
      "event-hash": ["receipt.response_body_hash", "receipt.signature"],
      "digest": ["receipt.keyset_digest", "receipt.signature"],
      "signature": ["receipt.signature"],
    };
    const independent: Record<string, string[]> = {
      "intact": [],
      "intact-stream": [],
      "response-byte": ["response_body_hash"],
      "stream-byte": ["response_body_hash"],
      "request-byte": ["request_body_hash"],
      "event": ["signature"],
      "event-hash": ["signature", "response_body_hash"],
      "digest": ["keyset_digest", "signature"],
      "signature": ["signature"],
    };

    await Deno.writeTextFile(`${dir}/report.json`, JSON.stringify(report));
    const runs = await Promise.all(variants.map(async (v) => {
      const checks = verifyReceipt(v.receipt, {
        report,
        requestBody: v.request,
        responseBody: v.response,
      });
      assert.deepEqual(
        checks.filter((c) => !c.ok).map((c) => c.name).sort(),
        expected[v.name],
        `library, ${v.name}`,
      );
      assert.deepEqual(
        independentFailures(v.receipt, keyset, { request: v.request, response: v.response }),
        independent[v.name],
        `independent, ${v.name}`,
      );
      await Deno.writeTextFile(`${dir}/${v.name}.receipt.json`, JSON.stringify(v.receipt, null, 2));
      await Deno.writeFile(`${dir}/${v.name}.request`, v.request);
      await Deno.writeFile(`${dir}/${v.name}.response`, v.response);
      return {
        name: v.name,
        run: await runVerifyCli([
          "--receipt",
          `${dir}/${v.name}.receipt.json`,
          "--report",
          `${dir}/report.json`,
          "--nonce",
          nonce,
          "--request",
          `${dir}/${v.name}.request`,
          "--response",
          `${dir}/${v.name}.response`,
          "--allow-dev",
        ]),
      };
    }));
    for (const { name, run } of runs) {
      assert.deepEqual(failedChecks(run), expected[name], `CLI, ${name}:\n${run.lines.join("\n")}`);
      assert.equal(run.code, expected[name].length === 0 ? 0 : 1, `CLI exit code, ${name}`);
      assert.ok(run.lines.some((l) => l.startsWith("PASS receipt.event_log")), name);
    }

    // The CLI fetching the receipt by URL with the key (and the report with a fresh nonce).
    const live = await runVerifyCli([
      "--receipt",
      `${gw.url}/v1/aci/receipts/${ex.receiptId}`,
      "--report",
      `${gw.url}/v1/aci/attestation`,
      "--request",
      `${dir}/intact.request`,
      "--response",
      `${dir}/intact.response`,
      "--allow-dev",
    ], { GATEWAY_API_KEY: gw.apiKey });
    assert.equal(live.code, 0, live.lines.join("\n"));
    assert.ok(!live.lines.join("\n").includes(gw.apiKey), "the CLI never prints the key");
  } finally {
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});
