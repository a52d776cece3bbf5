// Starts Portkey's open-source gateway (node_modules/@portkey-ai/gateway, the
// versions pinned by package-lock.json) on 127.0.0.1 and an ephemeral port, and
// prints `portkey listening on http://127.0.0.1:PORT` on stderr. Its start script
// binds every interface on a fixed port (8787); the listen call is narrowed here,
// nothing else of it is changed.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number") args.splice(1, typeof args[1] === "string" ? 1 : 0, "127.0.0.1");
  else if (args[0] && typeof args[0] === "object") args[0] = { ...args[0], host: "127.0.0.1" };
  this.once("listening", () => {
    console.error(`portkey listening on http://127.0.0.1:${this.address().port}`);
  });
  return listen.apply(this, args);
};
process.argv.push("--port=0", "--headless");
process.env.NODE_ENV = "production";
await import("@portkey-ai/gateway/build/start-server.js");
