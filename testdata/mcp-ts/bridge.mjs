// A bridge from a Go test to the official TypeScript MCP SDK's client:
// it connects to the MCP endpoint named by argv[2] (streamable HTTP:
// initialize, then the session), prints the tools/list result as one JSON
// line, then reads one {"tool", "args"} JSON line at a time from stdin,
// calls the tool with callTool, and prints one JSON line per call:
// {"structured", "isError", "text"} or {"error"}. End of input closes the
// session (DELETE) and exits 0.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import readline from "node:readline";

const client = new Client({ name: "agentpen-ts-test", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]));
await client.connect(transport);
const listed = await client.listTools();
console.log(JSON.stringify({ tools: listed.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema })) }));
const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const { tool, args } = JSON.parse(line);
  try {
    const r = await client.callTool({ name: tool, arguments: args });
    console.log(JSON.stringify({ structured: r.structuredContent ?? null, isError: r.isError ?? false, text: r.content?.[0]?.text ?? "" }));
  } catch (e) {
    console.log(JSON.stringify({ error: String(e) }));
  }
}
await transport.terminateSession();
await client.close();
