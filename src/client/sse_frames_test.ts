import assert from "node:assert/strict";
import { splitSseFrames } from "./sse_frames.ts";

Deno.test("splitSseFrames: complete frames out, the incomplete rest kept, CRLF too", () => {
  assert.deepEqual(splitSseFrames("data: a\n\ndata: b\r\n\r\ndata: c"), {
    frames: ["data: a", "data: b"],
    rest: "data: c",
  });
  assert.deepEqual(splitSseFrames("data: x"), { frames: [], rest: "data: x" });
  assert.deepEqual(splitSseFrames("data: x\n\n"), { frames: ["data: x"], rest: "" });
});
