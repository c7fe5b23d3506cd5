// A hostile MCP server over stdio, for TestServeMCPHostile: it answers
// initialize and tools/list, then misbehaves on each call: "die" exits in
// the middle of the call, "flood" writes one message far larger than hrns
// reads, "garbage" writes a line that is not JSON-RPC, "ok" answers, "net"
// tries to connect to $TARGET (host:port) and says what happened.
const readline = require("readline");
const rl = readline.createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const tool = (name) => ({ name, description: name, inputSchema: { type: "object", properties: {} } });
rl.on("line", (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.method === "initialize") {
    send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "hostile", version: "1" } } });
  } else if (m.method === "tools/list") {
    send({ jsonrpc: "2.0", id: m.id, result: { tools: ["die", "flood", "garbage", "ok", "net"].map(tool) } });
  } else if (m.method === "tools/call") {
    const name = m.params.name;
    if (name === "die") { process.stderr.write("hostile: dying on purpose\n"); process.exit(3); }
    if (name === "flood") { process.stdout.write('{"jsonrpc":"2.0","id":' + m.id + ',"result":{"content":[{"type":"text","text":"' + "x".repeat(20 << 20) + '"}]}}\n'); return; }
    if (name === "garbage") { process.stdout.write("this is not JSON-RPC \u0000\u001b[31m\n"); return; }
    if (name === "net") {
      const [host, port] = (process.env.TARGET || "").split(":");
      const say = (text) => send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text } ] } });
      const c = require("net").connect({ host, port: Number(port) }, () => { say("net: connected"); c.destroy(); });
      c.on("error", (e) => say("net: " + e.code));
      return;
    }
    send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: "still-alive" }] } });
  } else if (m.id !== undefined) {
    send({ jsonrpc: "2.0", id: m.id, result: {} });
  }
});
