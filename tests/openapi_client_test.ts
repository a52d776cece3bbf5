/**
 * A client generated from /openapi.json with `openapi-typescript` (#31): the
 * inference routes' answers are typed (`data.choices[0].message.content`,
 * `usage.cost`), `deno check` accepts code that uses them and rejects code
 * that misuses them; the real answers parse with the zod schemas the document
 * is generated from; `servers` is set and 429s declare `Retry-After`.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import openapiTS, { astToString } from "openapi-typescript";
import { startTestGateway } from "./support/gateway.ts";
import {
  ChatCompletionSchema,
  CompletionSchema,
  EmbeddingsSchema,
  MessageSchema,
  ResponseSchema,
} from "../src/formats/response_schemas.ts";

type Json = Record<string, unknown>;

const USES = `
import type { paths } from "./schema.ts";
type Ok<P extends keyof paths> = paths[P] extends { post: { responses: { 200: { content: { "application/json": infer T } } } } } ? T : never;
export function firstText(data: Ok<"/v1/chat/completions">): string | null {
  const cost: number | undefined = data.usage?.cost;
  void cost;
  return data.choices[0].message.content;
}
export function vector(data: Ok<"/v1/embeddings">): number[] | string {
  return data.data[0].embedding;
}
export function stop(data: Ok<"/v1/messages">): string | null {
  return data.stop_reason;
}
export function status(data: Ok<"/v1/responses">): string {
  return data.status;
}
`;

const MISUSE = `
import type { paths } from "./schema.ts";
type Chat = paths["/v1/chat/completions"]["post"]["responses"][200]["content"]["application/json"];
export const wrong = (data: Chat): number => data.choices[0].message.content;
`;

async function denoCheck(dir: string, file: string): Promise<{ code: number; text: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["check", "--no-config", file],
    cwd: dir,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, text: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

Deno.test("openapi-typescript: a generated client type-checks data.choices; answers match the schemas", async () => {
  const gw = await startTestGateway({ verification: "off" });
  const dir = await Deno.makeTempDir();
  try {
    const doc = await (await fetch(`${gw.url}/openapi.json`)).json() as Json;
    assert.deepEqual(doc.servers, [{ url: "/", description: "The gateway serving this document" }]);
    const paths = doc.paths as Record<string, Record<string, Json>>;
    for (const [p, ops] of Object.entries(paths)) {
      for (const op of Object.values(ops)) {
        const tooMany = (op.responses as Record<string, Json>)["429"];
        if (tooMany) assert.ok((tooMany.headers as Json)["retry-after"], `${p}: 429 Retry-After`);
      }
    }

    const ast = await openapiTS(doc as never);
    await Deno.writeTextFile(`${dir}/schema.ts`, astToString(ast));
    await Deno.writeTextFile(`${dir}/uses.ts`, USES);
    await Deno.writeTextFile(`${dir}/misuse.ts`, MISUSE);
    const ok = await denoCheck(dir, "uses.ts");
    assert.equal(ok.code, 0, ok.text);
    const bad = await denoCheck(dir, "misuse.ts");
    assert.notEqual(bad.code, 0, "a string | null is not a number");
    assert.match(bad.text, /TS2322/);

    // The schemas describe what is really served (each endpoint, through its own SDK).
    const openai = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "schema check" }];
    ChatCompletionSchema.parse(
      await openai.chat.completions.create({ model: "demo/echo", messages }),
    );
    CompletionSchema.parse(await openai.completions.create({ model: "demo/echo", prompt: "x" }));
    EmbeddingsSchema.parse(
      await openai.embeddings.create({ model: "demo/embed-small", input: "x" }),
    );
    ResponseSchema.parse(await openai.responses.create({ model: "demo/echo", input: "x" }));
    const anthropic = new Anthropic({ baseURL: gw.url, apiKey: gw.apiKey, maxRetries: 0 });
    MessageSchema.parse(
      await anthropic.messages.create({ model: "demo/echo", max_tokens: 32, messages }),
    );
  } finally {
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});
