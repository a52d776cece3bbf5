import assert from "node:assert/strict";
import { countChat, countText, FALLBACK_TOKENIZER, IMAGE_TOKENS } from "./count.ts";

Deno.test("real BPE counts, per tokenizer, not characters / 4", () => {
  assert.equal(countText("Hello world, this is a test", "o200k_base"), 7);
  assert.equal(countText("Hello world, this is a test", "cl100k_base"), 7);
  // Non-Latin text: far from chars/4, and the two encodings differ.
  const jp = "東京は日本の首都です。".repeat(10);
  assert.notEqual(countText(jp, "o200k_base"), countText(jp, "cl100k_base"));
  assert.notEqual(countText(jp, "o200k_base"), Math.ceil(jp.length / 4));
  assert.equal(countText("", "o200k_base"), 0);
  assert.equal(FALLBACK_TOKENIZER, "o200k_base");
});

Deno.test("a limit stops counting early and reports limit + 1", () => {
  const long = "word ".repeat(50_000);
  assert.equal(countText(long, "o200k_base"), 50_001);
  assert.equal(countText(long, "o200k_base", 1000), 1001);
  assert.equal(countText("a b c", "o200k_base", 1000), 3);
  const msgs = [{ role: "user", content: long }];
  assert.equal(countChat(msgs, "o200k_base", 1000), 1001);
});

Deno.test("chat framing: per message, names, images, tool calls, reply priming", () => {
  const base = countChat([{ role: "user", content: "hi" }], "o200k_base");
  assert.equal(base, 3 + 3 + countText("hi", "o200k_base"));
  const withImage = countChat([{
    role: "user",
    content: [{ type: "text", text: "hi" }, { type: "image_url" }],
  }], "o200k_base");
  assert.equal(withImage, base + IMAGE_TOKENS);
  const tool = countChat([{
    role: "assistant",
    content: null,
    tool_calls: [{ function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
  }], "o200k_base");
  assert.ok(tool > 6);
});

Deno.test("the encodings ship inside the package: counting works with the network denied", async () => {
  const url = new URL("./count.ts", import.meta.url).href;
  const dir = await Deno.makeTempDir();
  const script = `${dir}/offline.ts`;
  await Deno.writeTextFile(
    script,
    `const m = await import(${JSON.stringify(url)});\n` +
      `console.log(m.countText("offline tokenizer check", "o200k_base"), ` +
      `m.countText("offline tokenizer check", "cl100k_base"));\n`,
  );
  const out = await new Deno.Command(Deno.execPath(), {
    // No network for the child, and only the local cache: nothing may be fetched at run time.
    args: [
      "run",
      "--cached-only",
      "--deny-net",
      "--allow-read",
      "--config",
      new URL("../../deno.json", import.meta.url).pathname,
      script,
    ],
    env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  await Deno.remove(dir, { recursive: true });
  const text = new TextDecoder().decode(out.stdout).trim();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.match(text, /^\d+ \d+$/);
});
