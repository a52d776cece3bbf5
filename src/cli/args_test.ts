import assert from "node:assert/strict";
import { parseOptions, takeOptions, UsageError } from "./args.ts";

const SPEC = { strings: ["report", "at"], booleans: ["help"], multiple: ["include"] } as const;

Deno.test("parseOptions: values, flags and repeated options, in both spellings", () => {
  const p = parseOptions(
    ["--report", "r.json", "--at=2026-01-01", "--help", "--include", "a", "--include=b"],
    SPEC,
  );
  assert.deepEqual(p.values, { report: "r.json", at: "2026-01-01" });
  assert.deepEqual([...p.flags], ["help"]);
  assert.deepEqual(p.lists, { include: ["a", "b"] });
});

Deno.test("parseOptions: short messages for every kind of bad argument", () => {
  const cases: [string[], RegExp][] = [
    [["--bogus", "1"], /^unknown option --bogus$/],
    [["stray"], /^unexpected argument "stray"$/],
    [["--report"], /^--report needs a value$/],
    [["--report", "--at", "x"], /^--report needs a value$/],
    [["--report="], /^--report needs a value$/],
    [["--help=yes"], /^--help takes no value$/],
    [["--report", "a", "--report", "b"], /^--report given twice$/],
  ];
  for (const [args, message] of cases) {
    assert.throws(
      () => parseOptions(args, SPEC),
      (e) => e instanceof UsageError && message.test(e.message),
      args.join(" "),
    );
  }
});

Deno.test("takeOptions: takes its options and hands every other argument on in order", () => {
  const r = takeOptions(["create", "--config", "c.json", "--tier", "pro", "--x=1"], ["config"]);
  assert.deepEqual(r.values, { config: "c.json" });
  assert.deepEqual(r.rest, ["create", "--tier", "pro", "--x=1"]);
  assert.deepEqual(takeOptions(["--config=c", "list"], ["config"]).rest, ["list"]);
  assert.throws(() => takeOptions(["--config"], ["config"]), /--config needs a value/);
  assert.throws(() => takeOptions(["--config", "--tier"], ["config"]), /--config needs a value/);
});
