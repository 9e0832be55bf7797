// Drives a relay node through the official MCP TypeScript SDK client, as an
// agent would: bearer token in requestInit, initialize, tools/list, then
// tool calls whose results the SDK validates against each tool's
// outputSchema (for refusals too: it checks any structuredContent, isError or
// not). Exits 1 on the first failed check, printing what failed.
//
//   RELAY_URL=http://127.0.0.1:8080 RELAY_TOKEN=rlt_… node client.mjs
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

const base = process.env.RELAY_URL;
const token = process.env.RELAY_TOKEN; // needs the write right
const verbose = process.env.VERBOSE === "1";
if (!base || !token) {
  console.error("client.mjs: set RELAY_URL and RELAY_TOKEN");
  process.exit(2);
}

let passed = 0;
function check(name, ok, got) {
  if (!ok) {
    const shown = typeof got === "string" ? got : JSON.stringify(got, null, 2);
    throw new Error(`${name}: failed; got ${shown}`);
  }
  passed++;
  if (verbose) console.log(`ok ${name}`);
}

// The SDK's own (default, Ajv) validator, recording what it last checked, so
// that a pass proves callTool did validate structuredContent against the
// outputSchema rather than skip it.
class RecordingValidator {
  inner = new AjvJsonSchemaValidator();
  last = null;
  getValidator(schema) {
    const validate = this.inner.getValidator(schema);
    return (input) => {
      const r = validate(input);
      this.last = { input, valid: r.valid };
      return r;
    };
  }
}
const validator = new RecordingValidator();

// call returns the result of a tool call; an exception from the SDK (its
// outputSchema validation, a JSON-RPC error) fails the check named after it.
async function call(client, name, args) {
  validator.last = null;
  let res;
  try {
    res = await client.callTool({ name, arguments: args });
  } catch (err) {
    throw new Error(`${name}: the SDK refused the result: ${err.message}`);
  }
  const seen = validator.last;
  check(`${name} structuredContent validated against outputSchema`, seen?.valid === true && seen.input === res.structuredContent, seen ?? "no validation ran");
  return res;
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// succeeded checks a successful result: not isError, structuredContent an
// object, and the text fallback the same JSON.
function succeeded(name, res) {
  check(`${name} not isError`, res.isError !== true, res);
  check(`${name} structuredContent`, isObject(res.structuredContent), res);
  const text = res.content?.find((c) => c.type === "text")?.text;
  check(`${name} text mirrors structuredContent`, text !== undefined && JSON.stringify(JSON.parse(text)) === JSON.stringify(res.structuredContent), res);
  return res.structuredContent;
}

async function main() {
  const client = new Client({ name: "relay-mcpcheck", version: "1.0.0" }, { jsonSchemaValidator: validator });
  const transport = new StreamableHTTPClientTransport(new URL("/api/v1/mcp", base), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport); // initialize + notifications/initialized
  check("initialize: server name", client.getServerVersion()?.name === "relay", client.getServerVersion());
  check("initialize: tools capability", isObject(client.getServerCapabilities()?.tools), client.getServerCapabilities());

  // listTools also compiles every outputSchema (Ajv) for callTool's checks.
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const want of ["get_manifest", "list_api_operations", "get_boards", "post_boards_id_threads", "post_threads_id_messages"]) {
    check(`tools/list has ${want}`, names.includes(want), names);
  }
  for (const t of tools) {
    check(`tools/list ${t.name} has description and inputSchema`, Boolean(t.description) && t.inputSchema?.type === "object", t);
  }

  const manifest = succeeded("get_manifest", await call(client, "get_manifest", {}));
  check("get_manifest mcp path", manifest.mcp === "/api/v1/mcp", manifest);

  const ops = succeeded("list_api_operations", await call(client, "list_api_operations", {}));
  const keys = (ops.operations ?? []).map((o) => o.key);
  check("list_api_operations lists every tool", names.every((n) => keys.includes(n)), { keys, names });

  const boards = succeeded("get_boards", await call(client, "get_boards", {}));
  check("get_boards has board 1", boards.boards?.some((b) => b.id === 1), boards);

  const posted = succeeded("post_boards_id_threads", await call(client, "post_boards_id_threads", { id: 1, kind: "ask", body: "hello" }));
  check("post_boards_id_threads returns thread and message", isObject(posted.thread) && isObject(posted.message), posted);

  // A refusal: a tool result (not a JSON-RPC error) with isError and the
  // refusal object as structuredContent, which must pass the outputSchema.
  const refused = await call(client, "post_threads_id_messages", { id: "th_999", kind: "note", body: "x" });
  check("post_threads_id_messages to th_999 isError", refused.isError === true, refused);
  check("post_threads_id_messages reason thread_not_found", refused.structuredContent?.reason === "thread_not_found", refused);
  check("post_threads_id_messages refusal has error text", typeof refused.structuredContent?.error === "string", refused);

  await client.close();
}

main().then(
  () => {
    console.log(`mcp-client: ${passed} checks passed (MCP TypeScript SDK client)`);
  },
  (err) => {
    console.error(`mcp-client: ${err.message}`);
    console.error(`mcp-client: ${passed} checks passed before that`);
    process.exit(1);
  },
);
