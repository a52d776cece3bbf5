/**
 * A hostile OpenAI-style upstream, run as its own process (`deno run`) so its
 * socket writes race the gateway's reads as a remote server's would; in the
 * gateway's own event loop they could not. Prints its port on stdout.
 *
 * Modes:
 * - `extra-nagle` / `extra-nodelay`: answers each chat completion (echoing the
 *   last user message) and 1 ms later sends one unsolicited copy of that
 *   answer on the same kept-alive connection, with Nagle's algorithm on or off.
 */
import net from "node:net";

const mode = Deno.args[0] ?? "extra-nodelay";

function answer(content: string): string {
  const body = JSON.stringify({
    id: "chatcmpl-hostile",
    object: "chat.completion",
    created: 1,
    model: "m",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  });
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

function lastUserText(body: string): string {
  try {
    const j = JSON.parse(body) as { messages?: { content?: unknown }[] };
    const c = j.messages?.at(-1)?.content;
    return typeof c === "string" ? c : "";
  } catch {
    return "";
  }
}

const server = net.createServer((s) => {
  s.setNoDelay(mode === "extra-nodelay");
  s.on("error", () => {});
  let buf = Buffer.alloc(0);
  s.on("data", (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    while (true) {
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buf.subarray(0, end).toString("latin1");
      const m = /\r\ncontent-length: *(\d+)/i.exec(head);
      const len = m ? Number(m[1]) : 0;
      if (buf.length < end + 4 + len) return;
      const body = buf.subarray(end + 4, end + 4 + len).toString("utf8");
      buf = buf.subarray(end + 4 + len);
      const a = answer(lastUserText(body));
      s.write(a);
      // Unsolicited, a moment later (it answers no request): in its own segment, so it
      // lands after the gateway has read the answer, as a late duplicate would.
      setTimeout(() => s.writable && s.write(a), 1);
    }
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log((server.address() as net.AddressInfo).port);
});
