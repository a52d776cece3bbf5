import assert from "node:assert/strict";
import { rawJsonMember } from "./json_member.ts";

Deno.test("rawJsonMember returns the exact served text of a member", () => {
  const body = '{ "tcbInfo" : {"a":"}{\\"]","b":[1, {"c":2}]} ,"signature":"abcd"}';
  assert.equal(rawJsonMember(body, "tcbInfo"), '{"a":"}{\\"]","b":[1, {"c":2}]}');
  assert.equal(rawJsonMember(body, "signature"), '"abcd"');
  assert.equal(rawJsonMember(body, "missing"), null);
  assert.equal(rawJsonMember('{"x":{"y":1}', "x"), null, "unterminated object");
  assert.equal(rawJsonMember("[1,2]", "x"), null, "not an object");
  assert.equal(rawJsonMember('{"x":1,"x":2}', "x"), null, "duplicate member");
  assert.equal(rawJsonMember('{"x":1 "y":2}', "x"), null, "missing comma");
  assert.equal(rawJsonMember('{"x":1} trailing', "x"), null, "trailing text");
  // Only top-level members count.
  assert.equal(rawJsonMember('{"outer":{"tcbInfo":1}}', "tcbInfo"), null);
});
