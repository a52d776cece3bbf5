import assert from "node:assert/strict";
import {
  chatTokenCeiling,
  countChat,
  countText,
  FALLBACK_TOKENIZER,
  IMAGE_TOKENS,
  newBpeBudget,
  NOVEL_BUDGET,
  PIECE_MAX,
  REPLY_PRIMING_TOKENS,
  TokenCounter,
  TOKENS_PER_MESSAGE,
  vocabularyReadable,
} from "./count.ts";
import { tokenBounds } from "./bounds.ts";
import { GptEncoding } from "gpt-tokenizer/GptEncoding";
import o200kRanks from "gpt-tokenizer/bpeRanks/o200k_base";

Deno.test("real BPE counts, per tokenizer, not characters / 4", () => {
  assert.equal(countText("Hello world, this is a test", "o200k_base"), 7);
  assert.equal(countText("Hello world, this is a test", "cl100k_base"), 7);
  // Non-Latin text: far from chars/4, and the two encodings differ.
  const jp = "東京は日本の首都です。".repeat(10);
  assert.notEqual(countText(jp, "o200k_base"), countText(jp, "cl100k_base"));
  assert.notEqual(countText(jp, "o200k_base"), Math.ceil(jp.length / 4));
  assert.equal(countText("", "o200k_base"), 0);
  assert.equal(FALLBACK_TOKENIZER, "o200k_base");
  // The vocabulary the budget tells hits from merges by (gpt-tokenizer's layout) is readable.
  assert.ok(vocabularyReadable("o200k_base") && vocabularyReadable("cl100k_base"));
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

/** The hostile shapes (#25 item 1), 1 MB each, and a few more the pre-tokenizer could mind. */
function hostile(): Record<string, string> {
  const MB = 1024 * 1024;
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  let lower = "";
  while (lower.length < MB) lower += String.fromCharCode(97 + Math.floor(rnd() * 26));
  const han =
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经";
  let cjk = "";
  while (cjk.length < MB / 3) cjk += han[Math.floor(rnd() * han.length)];
  return {
    letter: "a".repeat(4 * MB),
    cjk,
    spaces: " ".repeat(MB),
    lower,
    upper: "A".repeat(MB),
    mixedCase: "aA".repeat(MB / 2),
    newlines: " \n".repeat(MB / 2),
    tabs: "\t ".repeat(MB / 2) + "x",
    punct: "!?".repeat(MB / 2),
  };
}

Deno.test("bounded: no piece over PIECE_MAX reaches the BPE, merging is budgeted, counts never low", () => {
  for (const [name, text] of Object.entries(hostile())) {
    const c = new TokenCounter("o200k_base");
    c.text(text);
    assert.ok(c.work.longestPiece <= PIECE_MAX, `${name}: piece ${c.work.longestPiece}`);
    assert.ok(c.work.merged <= NOVEL_BUDGET + PIECE_MAX, `${name}: merged ${c.work.merged}`);
    // Never below the exact count, measured where the library's exact count is affordable.
    const head = text.slice(0, 2_000);
    const exact = encodeExact(head);
    const bounded = countText(head, "o200k_base");
    assert.ok(bounded >= exact, `${name}: ${bounded} < exact ${exact}`);
    assert.ok(bounded <= exact * 1.1 + 2, `${name}: ${bounded} far above exact ${exact}`);
    assert.ok(c.total <= tokenBounds(text, "o200k_base").ceiling, `${name}: over the ceiling`);
  }
});

Deno.test("bounded: a limit the floor already passes costs no BPE at all", () => {
  const h = hostile();
  for (const name of ["letter", "lower", "cjk", "upper"]) {
    const c = new TokenCounter("o200k_base", 32_768);
    c.text(h[name]);
    assert.equal(c.total, 32_769, name);
    assert.equal(c.work.merged, 0, name);
  }
  // Spaces: the floor (bytes / 128) decides an 8,191-token embedding limit too.
  const s = new TokenCounter("o200k_base", 8_191);
  s.text(h.spaces);
  assert.equal(s.total, 8_192);
});

Deno.test("special-token text is counted as text, never refused or taken as a special token", () => {
  const n = countText("say <|endoftext|> and <|im_start|>", "o200k_base");
  assert.ok(n > 5);
  assert.equal(
    countText("<|endoftext|>", "cl100k_base"),
    countText("<|endoftext|>", "cl100k_base"),
  );
});

Deno.test("one budget per request: many texts share it", () => {
  const budget = newBpeBudget();
  let seed = 3;
  const word = () => {
    let w = "";
    for (let i = 0; i < 40; i++) {
      w += String.fromCharCode(97 + ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % 26));
    }
    return w;
  };
  let over = 0;
  for (let i = 0; i < 2_000; i++) {
    const c = new TokenCounter("o200k_base", undefined, budget);
    c.text(word());
    over += c.work.overBudget;
  }
  assert.ok(budget.left <= 0);
  assert.ok(over > 1_000, `${over} pieces counted by bytes once the budget was spent`);
});

function encodeExact(text: string): number {
  // The library on its own, special tokens as text: the reference for short inputs.
  return GptEncoding.getEncodingApi("o200k_base", () => o200kRanks).countTokens(text, {
    disallowedSpecial: new Set(),
  });
}

Deno.test("chatTokenCeiling is never below the count and reads no token (#27)", () => {
  const messages = [
    { role: "system", content: "You are a careful code reviewer.", name: "sys" },
    {
      role: "user",
      content: [
        { type: "text", text: "function f(x) { return x * 2; }\n".repeat(200) },
        { type: "image_url" },
        { type: "text", text: "漢字かなハングル한국어 😀 \ud800 lone" },
      ],
    },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ function: { name: "lookup", arguments: '{"q":"ünïcödé"}' } }],
    },
  ];
  for (const tokenizer of ["o200k_base", "cl100k_base"] as const) {
    const exact = countChat(messages, tokenizer);
    const ceiling = chatTokenCeiling(messages);
    assert.ok(ceiling >= exact, `${tokenizer}: ceiling ${ceiling} < count ${exact}`);
  }
  // Framing only: priming, per message, the name's token, the image.
  assert.equal(
    chatTokenCeiling([{ role: "user", content: "" }]),
    REPLY_PRIMING_TOKENS + TOKENS_PER_MESSAGE,
  );
  assert.equal(
    chatTokenCeiling([{ role: "user", content: [{ type: "image_url" }], name: "ab" }]),
    REPLY_PRIMING_TOKENS + TOKENS_PER_MESSAGE + 1 + 2 + IMAGE_TOKENS,
  );
});
