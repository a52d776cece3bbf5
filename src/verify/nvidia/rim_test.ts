import assert from "node:assert/strict";
import { FULL_RIMS, readFixtureText, ROOTS } from "../../../tests/support/nvidia_fixtures.ts";
import { verifyRim } from "./rim.ts";

const AT = Date.parse("2025-10-24T12:00:00Z");
const DRIVER = readFixtureText(FULL_RIMS["NV_GPU_DRIVER_GH100_550.90.07"]);
const INJECTED = '<ns0:Resource type="Measurement" index="50" active="True" alternatives="1" ' +
  `ns2:Hash0="${"ab".repeat(48)}" name="Injected" size="48"/>`;

Deno.test("rim: the genuine driver RIM yields its version and 21 active measurements", async () => {
  const r = await verifyRim(DRIVER, ROOTS.rim, AT, "driver RIM");
  assert.ok(r.ok, r.ok ? "" : r.reason);
  assert.equal(r.version, "550.90.07");
  assert.equal(r.measurements.length, 21);
  assert.deepEqual(r.measurements.map((m) => m.index), [
    7,
    ...Array.from({ length: 20 }, (_, i) => 21 + i),
  ]);
  assert.equal(r.chain.length, 4);
  assert.equal(r.chain.at(-1)!.subject, "C=US, O=NVIDIA, CN=NVIDIA CoRIM signing Root CA");
});

Deno.test("rim: content smuggled into ds:Signature is never read; edits to the payload break the digest", async () => {
  // Inside the signature the enveloped transform hides it from the digest: still valid, not read.
  const wrapped = DRIVER.replace(
    "</ds:SignatureValue>",
    `</ds:SignatureValue><ds:Object>${INJECTED}</ds:Object>`,
  );
  assert.notEqual(wrapped, DRIVER);
  const w = await verifyRim(wrapped, ROOTS.rim, AT, "d");
  assert.ok(w.ok, w.ok ? "" : w.reason);
  assert.equal(w.measurements.length, 21);
  assert.ok(!w.measurements.some((m) => m.index === 50));
  // In the payload it is signed content, so the digest no longer matches.
  const added = DRIVER.replace("</ns0:Payload>", `${INJECTED}</ns0:Payload>`);
  assert.notEqual(added, DRIVER);
  const a = await verifyRim(added, ROOTS.rim, AT, "d");
  assert.ok(!a.ok && /Reference digest does not match/.test(a.reason));
  const deactivated = DRIVER.replace('index="7" active="True"', 'index="7" active="False"');
  assert.notEqual(deactivated, DRIVER);
  const d = await verifyRim(deactivated, ROOTS.rim, AT, "d");
  assert.ok(!d.ok && /Reference digest does not match/.test(d.reason));
});

Deno.test("rim: hostile documents are refused with a reason", async () => {
  const cases: [string, RegExp][] = [
    ["<not xml", /does not parse|not a SWID/],
    [`<!DOCTYPE x [<!ENTITY e "x">]>${DRIVER}`, /document type declarations are refused/],
    [DRIVER.replace("xml-c14n11", "xml-exc-c14n#"), /not the expected enveloped/],
    [DRIVER.replace("<ns0:Meta ", '<ns0:Meta xml:lang="en" '), /xml:\* attributes/],
    ['<a xmlns="urn:x"/>', /not a SWID SoftwareIdentity/],
  ];
  for (const [xml, reason] of cases) {
    const r = await verifyRim(xml, ROOTS.rim, AT, "d");
    assert.ok(!r.ok, String(reason));
    assert.match(r.reason, reason);
  }
});
