import assert from "node:assert/strict";
import { createAdmitter } from "../admission/admission.ts";
import { getBalance } from "../admission/credits.ts";
import { authenticate } from "../keys/keys.ts";
import { DEFAULT_TIERS } from "../admission/rate_limit.ts";
import { GatewayError } from "../http/errors.ts";
import { GroupCommitter } from "../store/group_commit.ts";
import { KEYS_USAGE, runKeys } from "./keys.ts";

const T0 = 1_700_000_000_000;

async function cli(kv: Deno.Kv, ...args: string[]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await runKeys(args, {
    kv,
    print: (l) => lines.push(l),
    now: () => T0,
    tiers: DEFAULT_TIERS,
  });
  return { code, lines };
}

async function create(kv: Deno.Kv, ...args: string[]): Promise<{ id: string; key: string }> {
  const { code, lines } = await cli(kv, "create", ...args);
  assert.equal(code, 0, lines.join("\n"));
  const id = /^key_id: (key_[0-9a-f]{12})$/.exec(lines[0])?.[1];
  assert.ok(id !== undefined);
  return { id, key: lines[lines.length - 1] };
}

Deno.test("create prints the key alone on the last line, and it authenticates", async () => {
  const kv = await Deno.openKv(":memory:");
  const { code, lines } = await cli(
    kv,
    "create",
    "--tier",
    "pro",
    "--credits",
    "2.5",
    "--name",
    "ci",
  );
  assert.equal(code, 0);
  assert.match(lines[0], /^key_id: key_[0-9a-f]{12}$/);
  assert.equal(lines[1], "tier: pro");
  assert.equal(lines[2], "credits: 2.5");
  const key = lines[lines.length - 1];
  assert.match(key, /^cgw-[A-Za-z0-9_-]{43}$/);
  const rec = await authenticate(kv, `Bearer ${key}`);
  assert.equal(`key_id: ${rec.key_id}`, lines[0]);
  assert.equal(rec.name, "ci");
  assert.equal(await getBalance(kv, rec.key_id), 2_500_000_000n);
  kv.close();
});

Deno.test("list shows every key with status and balance, never the key", async () => {
  const kv = await Deno.openKv(":memory:");
  const a = await create(kv, "--tier", "free", "--credits", "1", "--name", "alpha");
  const b = await create(kv, "--tier", "enterprise", "--rpm", "10", "--tpm", "1000");
  assert.equal((await cli(kv, "revoke", b.id)).code, 0);
  const { code, lines: all } = await cli(kv, "list");
  assert.equal(code, 0);
  assert.equal(all.length, 3);
  assert.equal(
    all[0],
    "KEY_ID\tNAME\tTIER\tSTATUS\tBALANCE\tRESERVED\tAVAILABLE",
    "a header row",
  );
  const lines = all.slice(1);
  const byId = new Map(lines.map((l) => [l.split("\t")[0], l.split("\t")]));
  assert.deepEqual(byId.get(a.id), [a.id, '"alpha"', "free", "active", "1", "0", "1"]);
  assert.deepEqual(byId.get(b.id), [b.id, '""', "enterprise", "revoked", "0", "0", "0"]);
  for (const l of lines) {
    assert.ok(!l.includes(a.key) && !l.includes(b.key));
    assert.ok(!l.includes("cgw-"));
  }
  kv.close();
});

Deno.test("credit adds exact decimal amounts and rejects bad numbers", async () => {
  const kv = await Deno.openKv(":memory:");
  const { id } = await create(kv, "--tier", "free");
  assert.equal((await cli(kv, "credit", id, "0.000000001")).code, 0);
  const r = await cli(kv, "credit", id, "10.5");
  assert.equal(r.code, 0);
  assert.equal(
    r.lines[0],
    `credited 10.5 to ${id}; balance 10.500000001 (reserved 0, available 10.500000001)`,
  );
  assert.equal(await getBalance(kv, id), 10_500_000_001n);
  for (const bad of ["-1", "0", "1e9", "abc", "0.0000000001", ""]) {
    const res = await cli(kv, "credit", id, bad);
    assert.equal(res.code, 2, `amount ${JSON.stringify(bad)}`);
    assert.equal(res.lines[res.lines.length - 1], "usage: keys credit <key-id> <amount>");
  }
  assert.equal(await getBalance(kv, id), 10_500_000_001n);
  assert.equal((await cli(kv, "credit", "key_000000000000", "1")).code, 1);
  kv.close();
});

Deno.test("revoke makes the key fail authentication", async () => {
  const kv = await Deno.openKv(":memory:");
  const { id, key } = await create(kv, "--tier", "pro", "--credits", "1");
  await authenticate(kv, `Bearer ${key}`);
  const r = await cli(kv, "revoke", id);
  assert.deepEqual(r, { code: 0, lines: [`revoked ${id}`] });
  await assert.rejects(
    authenticate(kv, `Bearer ${key}`),
    (e: unknown) => e instanceof GatewayError && e.kind === "invalid_api_key",
  );
  assert.equal((await cli(kv, "revoke", "key_000000000000")).code, 1);
  kv.close();
});

Deno.test("show prints balance, usage totals, limits and the rate bucket levels", async () => {
  const kv = await Deno.openKv(":memory:");
  const { id, key } = await create(kv, "--tier", "free", "--credits", "1", "--name", "shown");
  const rec = await authenticate(kv, `Bearer ${key}`);
  const admitter = createAdmitter(kv, { tiers: DEFAULT_TIERS, now: () => T0 });
  const gc = new GroupCommitter(kv);
  const adm = await admitter.admit(rec, { tokens: 500, costNano: 400_000_000n, requestId: "q" });
  await gc.write(
    adm.settlement({ promptTokens: 100, completionTokens: 50, costNano: 250_000_000n }),
  );
  const { code, lines } = await cli(kv, "show", id);
  assert.equal(code, 0);
  const text = lines.join("\n");
  assert.match(text, /^name: shown$/m);
  assert.match(text, /^status: active$/m);
  assert.match(text, /^balance: 0\.75$/m);
  assert.match(text, /^reserved: 0$/m);
  assert.match(text, /^available: 0\.75$/m);
  assert.match(text, /^usage: requests=1 prompt_tokens=100 completion_tokens=50 spent=0\.25$/m);
  assert.match(text, /^limits: rpm=60 tpm=100000$/m);
  assert.match(text, /^rate buckets: requests=1\/60 tokens=150\/100000 resets_in=\d+s$/m);
  assert.match(text, /^rate reserved by quota leases: requests=0 tokens=0$/m);
  assert.ok(!text.includes(key));
  assert.equal((await cli(kv, "show", "key_000000000000")).code, 1);
  kv.close();
});

Deno.test("usage errors exit 2 with the usage line", async () => {
  const kv = await Deno.openKv(":memory:");
  const cases: string[][] = [
    [],
    ["bogus"],
    ["create"],
    ["create", "--tier", "gold"],
    ["create", "--tier", "pro", "--rpm", "10", "--tpm", "100"],
    ["create", "--tier", "enterprise", "--rpm", "10"],
    ["create", "--tier", "enterprise", "--rpm", "0", "--tpm", "5"],
    ["create", "--tier", "free", "--credits"],
    ["create", "--tier", "free", "--what", "x"],
    ["create", "--tier", "free", "--credits", "-3"],
    ["list", "extra"],
    ["revoke"],
    ["revoke", "not-an-id"],
    ["credit", "key_000000000000"],
    ["show"],
  ];
  for (const args of cases) {
    const { code, lines } = await cli(kv, ...args);
    assert.equal(code, 2, args.join(" "));
    assert.ok(lines.some((l) => l.startsWith("usage: keys")), args.join(" "));
    if (args.length > 0) assert.match(lines[0], /^error: /);
  }
  assert.deepEqual(await cli(kv, "bogus"), {
    code: 2,
    lines: ["error: unknown command: bogus", KEYS_USAGE],
  });
  assert.equal((await cli(kv, "list")).lines.length, 1, "nothing was created (header only)");
  kv.close();
});

Deno.test("--help on every command prints its usage and exits 0", async () => {
  const kv = await Deno.openKv(":memory:");
  for (const cmd of ["create", "list", "show", "credit", "revoke", "limits", "usage"]) {
    for (const flag of ["--help", "-h"]) {
      const { code, lines } = await cli(kv, cmd, flag);
      assert.equal(code, 0, `${cmd} ${flag}`);
      assert.ok(lines[0].startsWith(`usage: keys ${cmd}`), lines[0]);
      assert.ok(lines.length >= 2, "and a description");
    }
  }
  const top = await cli(kv, "--help");
  assert.equal(top.code, 0);
  assert.equal(top.lines[0], KEYS_USAGE);
  // --help never acts: nothing was created.
  assert.equal((await cli(kv, "create", "--tier", "free", "--help")).code, 0);
  assert.equal((await cli(kv, "list")).lines.length, 1);
  kv.close();
});

Deno.test("credit and show print one balance figure, also with a refund pending", async () => {
  const kv = await Deno.openKv(":memory:");
  const { id, key } = await create(kv, "--tier", "free", "--credits", "1");
  const rec = await authenticate(kv, `Bearer ${key}`);
  const admitter = createAdmitter(kv, { tiers: DEFAULT_TIERS, now: () => T0 });
  const gc = new GroupCommitter(kv);
  // Reserve 0.4, settle at 0.25: 0.15 is refunded into a counter the next admission folds.
  const adm = await admitter.admit(rec, { tokens: 500, costNano: 400_000_000n, requestId: "q" });
  await gc.write(
    adm.settlement({ promptTokens: 100, completionTokens: 50, costNano: 250_000_000n }),
  );
  const credited = await cli(kv, "credit", id, "1");
  assert.equal(credited.lines[0], `credited 1 to ${id}; balance 1.75 (reserved 0, available 1.75)`);
  const shown = (await cli(kv, "show", id)).lines.find((l) => l.startsWith("balance: "));
  assert.equal(shown, "balance: 1.75");
  const listed = (await cli(kv, "list")).lines[1].split("\t")[4];
  assert.equal(listed, "1.75");
  await admitter.close();
  await gc.close();
  kv.close();
});

Deno.test("crediting a revoked key warns; limits and usage commands", async () => {
  const kv = await Deno.openKv(":memory:");
  const { id } = await create(kv, "--tier", "free");
  const ok = await cli(kv, "credit", id, "2");
  assert.equal(ok.lines.length, 1, "no warning for an active key");
  assert.equal((await cli(kv, "revoke", id)).code, 0);
  const warned = await cli(kv, "credit", id, "2");
  assert.equal(warned.code, 0);
  assert.equal(warned.lines[1], `warning: ${id} is revoked: its credits cannot be spent`);

  const { id: e } = await create(kv, "--tier", "free");
  const set = await cli(kv, "limits", e, "--tier", "enterprise", "--rpm", "9", "--tpm", "900");
  assert.deepEqual(set, { code: 0, lines: [`${e}: tier enterprise, rpm=9 tpm=900`] });
  assert.match((await cli(kv, "show", e)).lines.join("\n"), /^limits: rpm=9 tpm=900$/m);
  const cleared = await cli(kv, "limits", e, "--clear");
  assert.deepEqual(cleared.lines, [`${e}: tier enterprise, rpm=6000 tpm=10000000`]);
  assert.equal((await cli(kv, "limits", e, "--tier", "pro", "--rpm", "5", "--tpm", "5")).code, 2);
  assert.equal((await cli(kv, "limits", e)).code, 2);

  const usage = await cli(kv, "usage", e, "--from", "2023-11-01", "--to", "2023-11-14");
  assert.equal(usage.code, 0);
  assert.deepEqual(usage.lines, ["DATE\tMODEL\tREQUESTS\tPROMPT_TOKENS\tCOMPLETION_TOKENS\tSPENT"]);
  assert.equal((await cli(kv, "usage", e, "--from", "yesterday")).code, 2);
  kv.close();
});
