import assert from "node:assert/strict";
import { type CountableMessage, countChatInto, NOVEL_BUDGET, TokenCounter } from "./count.ts";
import { REUSE_MIN_CHARS, TextCounts } from "./text_counts.ts";

const SECRET = new Uint8Array(32).fill(7);

/** Source-like text: distinct per seed, long enough to be reused. */
function code(seed: number, chars = 6000): string {
  let s = "";
  for (let i = 0; s.length < chars; i++) {
    s += `export function f${seed}_${i}(x: number): number {\n  return x * ${i} + ${seed};\n}\n`;
  }
  return s.slice(0, chars);
}

const conversation = (turns: number): CountableMessage[] => [
  { role: "system", content: code(0, 9000) },
  ...Array.from({ length: turns }, (_, t) => [
    { role: "user", content: `turn ${t}` },
    { role: "tool", content: code(t + 1) },
  ]).flat(),
];

const count = (
  messages: CountableMessage[],
  counts?: TextCounts,
  scope = "key-a",
  limit?: number,
) => {
  const c = new TokenCounter("o200k_base", limit, undefined, counts?.scope(scope));
  countChatInto(c, messages);
  return c;
};

Deno.test("reused counts: the same figures as counting afresh, and a grown conversation tokenizes only its new texts", () => {
  const counts = new TextCounts(SECRET);
  for (let turns = 1; turns <= 6; turns++) {
    const msgs = conversation(turns);
    const fresh = count(msgs);
    const reused = count(msgs, counts);
    assert.equal(reused.total, fresh.total, `turns ${turns}`);
    // Everything but the newest tool answer was counted by the previous request.
    const newest = (msgs.at(-1)!.content as string).length;
    const long = msgs.reduce(
      (n, m) =>
        n +
        (typeof m.content === "string" && m.content.length >= REUSE_MIN_CHARS
          ? m.content.length
          : 0),
      0,
    );
    assert.equal(reused.work.reused, turns === 1 ? 0 : long - newest, `turns ${turns}`);
  }
  assert.ok(counts.totals.reused > 0);
  assert.ok(counts.totals.tokenized > 0);
});

Deno.test("reused counts: one key's counts are never another's", () => {
  const counts = new TextCounts(SECRET);
  const msgs = conversation(2);
  count(msgs, counts, "key-a");
  assert.ok(count(msgs, counts, "key-a").work.reused > 0);
  assert.equal(count(msgs, counts, "key-b").work.reused, 0);
  // Another process's secret names entries differently.
  const other = new TextCounts(new Uint8Array(32).fill(8));
  const text = code(1);
  assert.notEqual(
    counts.name("key-a", "o200k_base", text),
    other.name("key-a", "o200k_base", text),
  );
  assert.notEqual(
    counts.name("key-a", "o200k_base", text),
    counts.name("key-a", "cl100k_base", text),
  );
  // Entries are named by a MAC, never by the text.
  assert.match(counts.name("key-a", "o200k_base", text), /^[A-Za-z0-9+/]{43}=$/);
});

Deno.test("reused counts: a count cut short by the limit or partly by bytes is not kept", () => {
  const counts = new TextCounts(SECRET);
  const msgs = conversation(1);
  const full = count(msgs).total;
  // Past the limit: the counter stops, the figure is limit + 1, nothing kept.
  const cut = count(msgs, counts, "key-a", 100);
  assert.equal(cut.total, 101);
  assert.equal(counts.size, 0);
  // Counted whole, then reused against a limit it passes: still limit + 1.
  assert.equal(count(msgs, counts).total, full);
  assert.equal(counts.size, 2);
  const again = count(msgs, counts, "key-a", 100);
  assert.equal(again.total, 101);
  // The BPE budget spent: pieces counted as their bytes (an over-count) are not kept.
  const spent = new TextCounts(SECRET);
  const c = new TokenCounter("o200k_base", undefined, { left: 0 }, spent.scope("key-a"));
  // Words no vocabulary holds and no earlier count met (the memo is per process).
  const novel = Array.from(
    { length: 800 },
    (_, i) => `qzx${i.toString(26).replace(/./g, (d) => "jkvwyq"[parseInt(d, 26) % 6])}vq`,
  ).join(" ");
  c.text(novel);
  assert.ok(c.work.overBudget > 0);
  assert.equal(spent.size, 0);
  assert.ok(NOVEL_BUDGET > 0);
});

Deno.test("reused counts: bounded, the least recently used dropped first", () => {
  const counts = new TextCounts(SECRET, 2, 2);
  const [a, b, c] = [code(1), code(2), code(3)];
  const once = (t: string) => {
    const k = new TokenCounter("o200k_base", undefined, undefined, counts.scope("k"));
    k.text(t);
    return k.work.reused;
  };
  once(a);
  once(b);
  assert.equal(once(a), a.length); // a is now the most recent
  once(c); // drops b
  assert.equal(counts.size, 2);
  assert.equal(once(a), a.length);
  assert.equal(once(b), 0);
  // Short texts are counted, not kept.
  once("short text");
  assert.equal(counts.size, 2);
  assert.throws(() => new TextCounts(new Uint8Array(16)), /at least 32 bytes/);
});

Deno.test("reused counts: one key sending many long texts cannot push another key's counts out", () => {
  // 8 entries in all, at most 2 per key.
  const counts = new TextCounts(SECRET, 8, 2);
  const put = (scope: string, t: string) => {
    const k = new TokenCounter("o200k_base", undefined, undefined, counts.scope(scope));
    k.text(t);
    return k.work.reused;
  };
  put("agent", code(1));
  put("agent", code(2));
  // A flood from another key: 50 distinct long texts.
  for (let i = 0; i < 50; i++) put("flood", code(100 + i, 2100));
  assert.equal(put("agent", code(1)), code(1).length);
  assert.equal(put("agent", code(2)), code(2).length);
  // Many keys: the least recently used key gives up its oldest entry first.
  for (let i = 0; i < 6; i++) put(`k${i}`, code(200 + i, 2100));
  assert.equal(counts.size, 8);
  assert.equal(put("agent", code(2)), code(2).length);
  assert.equal(put("agent", code(1)), code(1).length);
  assert.equal(put("flood", code(149, 2100)), 0);
});

Deno.test("reused counts: a key with nothing kept is told so (its texts need no naming)", () => {
  const counts = new TextCounts(SECRET);
  assert.equal(counts.scope("new").any, false);
  const k = new TokenCounter("o200k_base", undefined, undefined, counts.scope("new"));
  k.text(code(7));
  assert.equal(counts.scope("new").any, true);
  assert.equal(counts.scope("other").any, false);
});
