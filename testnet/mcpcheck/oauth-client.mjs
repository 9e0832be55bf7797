// Drives the corpus's MCP endpoint (/mcp) through the official MCP
// TypeScript SDK client and its OAuth 2.1 support, headlessly: the SDK
// discovers the metadata from the 401, registers the client dynamically and
// builds the authorization URL (PKCE S256, resource); "the browser" here is a
// fetch that does not follow the redirect, since /oauth/authorize redirects
// at once without consent, and the code goes to transport.finishAuth. Then
// tools/list and tool calls, every structuredContent validated by the SDK
// against the tool's outputSchema (refusals too). Exits 1 on the first
// failed check.
//
//   RELAY_URL=http://127.0.0.1:8080 node oauth-client.mjs
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

const base = process.env.RELAY_URL;
const verbose = process.env.VERBOSE === "1";
if (!base) {
  console.error("oauth-client.mjs: set RELAY_URL");
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

// A provider that keeps everything in memory and "opens the browser" with
// a fetch that stops at the redirect.
const redirectUrl = "http://127.0.0.1:53682/callback";
class HeadlessProvider {
  info = undefined;
  saved = undefined;
  verifier = undefined;
  code = undefined;
  authorizeURL = undefined;
  get redirectUrl() {
    return redirectUrl;
  }
  get clientMetadata() {
    return {
      client_name: "relay-mcpcheck oauth",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      scope: "toastmachine:read toastmachine:write",
    };
  }
  state() {
    return "mcpcheck-state";
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  saveCodeVerifier(v) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  async redirectToAuthorization(url) {
    this.authorizeURL = url;
    const res = await fetch(url, { redirect: "manual" });
    const loc = res.headers.get("location");
    check("authorize answers with a redirect at once (no consent)", res.status === 302 && loc, { status: res.status, loc });
    const back = new URL(loc);
    check("the redirect goes to the registered redirect_uri", back.origin + back.pathname === redirectUrl, loc);
    check("the redirect carries state", back.searchParams.get("state") === "mcpcheck-state", loc);
    check("the redirect carries a code", Boolean(back.searchParams.get("code")), loc);
    this.code = back.searchParams.get("code");
  }
}

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

function succeeded(name, res) {
  check(`${name} not isError`, res.isError !== true, res);
  check(`${name} structuredContent`, isObject(res.structuredContent), res);
  const text = res.content?.find((c) => c.type === "text")?.text;
  check(`${name} text mirrors structuredContent`, text !== undefined && JSON.stringify(JSON.parse(text)) === JSON.stringify(res.structuredContent), res);
  return res.structuredContent;
}

// retrievalSize checks serialized_bytes with JSON.stringify itself.
function retrievalSize(name, sc) {
  const { retrieval_size: rs, ...rest } = sc;
  const n = Buffer.byteLength(JSON.stringify(rest), "utf8");
  check(`${name} retrieval_size is JSON.stringify's byte count`, rs?.serialized_bytes === n && rs.estimated_tokens === Math.ceil(n / 4) && rs.estimation_method === "utf8-json-bytes-div4-v1", { rs, n });
}

async function main() {
  const mcpURL = new URL("/mcp", base);
  const provider = new HeadlessProvider();
  const client = new Client({ name: "relay-mcpcheck-oauth", version: "1.0.0" }, { jsonSchemaValidator: validator });

  // First connect: 401 → discovery → registration → authorization.
  let transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  try {
    await client.connect(transport);
    throw new Error("connected without authorization");
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  check("dynamic client registration", typeof provider.info?.client_id === "string", provider.info);
  const au = provider.authorizeURL;
  check("authorization URL on the advertised /oauth/authorize", au?.pathname === "/oauth/authorize", String(au));
  check("authorization URL asks PKCE S256", au.searchParams.get("code_challenge_method") === "S256" && Boolean(au.searchParams.get("code_challenge")), String(au));
  check("authorization URL names the resource", au.searchParams.get("resource") === mcpURL.href, String(au));
  await transport.finishAuth(provider.code);
  check("token exchange", typeof provider.saved?.access_token === "string" && provider.saved.token_type === "Bearer", provider.saved);
  check("granted scopes", provider.saved.scope === "toastmachine:read toastmachine:write", provider.saved);

  // Second connect, with the token.
  transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  await client.connect(transport);
  check("initialize: server name", client.getServerVersion()?.name === "relay-corpus", client.getServerVersion());
  check("initialize: instructions mark corpus content untrusted", /untrusted/.test(client.getInstructions() ?? ""), client.getInstructions());

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  const want = ["append_message", "create_conversation", "create_relationship", "get_conversation", "get_message", "get_messages",
    "get_operation_token", "list_conversations", "list_kinds", "list_relationship_types", "list_relationships", "pull_conversation",
    "retract_relationship", "search"];
  check("tools/list is the corpus's tools", JSON.stringify(names) === JSON.stringify(want), names);

  const tok = succeeded("get_operation_token", await call(client, "get_operation_token", {}));
  const args = { operation_token: tok.operation_token, subject: "Caching <latency>", content: "A warm cache \u2028 halves latency & <b>tail</b> 😀", kind: ["claim"] };
  const created = succeeded("create_conversation", await call(client, "create_conversation", args));
  retrievalSize("create_conversation", created);
  const again = succeeded("create_conversation (retry)", await call(client, "create_conversation", args));
  check("a retry with the same token is the same write", again.message_id === created.message_id && again.sequence === created.sequence, { created, again });

  const msg = await call(client, "get_message", { message_id: created.message_id });
  retrievalSize("get_message", succeeded("get_message", msg));
  check("get_message marked untrusted in _meta", msg._meta?.["relay/untrusted_content"]?.untrusted === true, msg._meta);
  retrievalSize("search", succeeded("search", await call(client, "search", { query: "latency" })));
  const graph = succeeded("pull_conversation", await call(client, "pull_conversation", { conversation_id: created.conversation_id }));
  retrievalSize("pull_conversation", graph);
  check("pull_conversation complete", graph.complete === true && graph.messages.length === 1, graph);
  const kinds = succeeded("list_kinds", await call(client, "list_kinds", {}));
  check("list_kinds has no retrieval_size", kinds.retrieval_size === undefined, kinds);

  const refused = await call(client, "get_message", { message_id: "nope" });
  check("get_message of nothing isError", refused.isError === true, refused);
  check("refusal in the corpus's shape", refused.structuredContent?.error?.code === "not_found" && typeof refused.structuredContent.error.how_to_proceed === "string", refused);
  const tooSmall = await call(client, "pull_conversation", { conversation_id: created.conversation_id, max_response_bytes: 64 });
  check("pull_conversation response_budget_too_small", tooSmall.isError === true && tooSmall.structuredContent?.error?.code === "response_budget_too_small", tooSmall);

  // The access token stops working, as after its hour, and two calls meet
  // the 401 at once: the SDK refreshes twice with one refresh token. The
  // server answers the second with invalid_grant without revoking what the
  // first got, so both calls, and those after, go through.
  const refreshed = provider.saved.refresh_token;
  provider.saved = { ...provider.saved, access_token: provider.saved.access_token.replace(/_[^_]+$/, "_expiredexpiredexpired") };
  const both = await Promise.allSettled([call(client, "list_kinds", {}), call(client, "list_kinds", {})]);
  check("two calls after the access token expired, refreshed at once", both.every((r) => r.status === "fulfilled" && !r.value.isError), both);
  check("the refresh rotated the refresh token", provider.saved.refresh_token !== refreshed, provider.saved);
  const later = await call(client, "list_kinds", {});
  check("a call after the two refreshes", !later.isError, later);

  await client.close();
}

main().then(
  () => {
    console.log(`mcp-oauth: ${passed} checks passed (MCP TypeScript SDK client, OAuth 2.1)`);
  },
  (err) => {
    console.error(`mcp-oauth: ${err.stack ?? err.message}`);
    console.error(`mcp-oauth: ${passed} checks passed before that`);
    process.exit(1);
  },
);
