import assert from "node:assert/strict";
import { compose, type Layer } from "./chain.ts";

type S = { seen: string[]; fail?: string; answer?: string };

const layer = (name: string): Layer<S> => ({
  enter(s) {
    s.seen.push(`enter ${name}`);
    if (s.fail === name) throw new Error(name);
    return s.answer === name ? new Response(`from ${name}`) : undefined;
  },
  leave(s, res) {
    s.seen.push(`leave ${name} ${res.status}`);
  },
});

const run = compose<S>(
  [layer("a"), { leave: (s) => void s.seen.push("leave only") }, layer("b")],
  (s) => {
    s.seen.push("inner");
    if (s.fail === "inner") throw new Error("inner");
    return new Response("inner");
  },
  (s, e) => {
    s.seen.push(`render ${(e as Error).message}`);
    return new Response("error", { status: 500 });
  },
);

Deno.test("chain: enters in order, the handler, leaves innermost first", async () => {
  const s: S = { seen: [] };
  assert.equal(await (await run(s)).text(), "inner");
  assert.deepEqual(s.seen, [
    "enter a",
    "enter b",
    "inner",
    "leave b 200",
    "leave only",
    "leave a 200",
  ]);
});

Deno.test("chain: a layer may answer instead; later layers and the handler do not run, every leave does", async () => {
  const s: S = { seen: [], answer: "a" };
  assert.equal(await (await run(s)).text(), "from a");
  assert.deepEqual(s.seen, ["enter a", "leave b 200", "leave only", "leave a 200"]);
});

Deno.test("chain: a throw (in a layer or the handler) is rendered once and every leave sees the rendered answer", async () => {
  for (const fail of ["b", "inner"]) {
    const s: S = { seen: [], fail };
    assert.equal((await run(s)).status, 500);
    assert.deepEqual(s.seen.slice(-4), [
      `render ${fail}`,
      "leave b 500",
      "leave only",
      "leave a 500",
    ]);
  }
});
