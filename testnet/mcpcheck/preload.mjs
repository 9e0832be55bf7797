// Loaded with `node --import ./preload.mjs` into the conformance suite, whose
// client has no way to send credentials. It wraps the global fetch (which the
// suite's MCP SDK transport uses) for requests to RELAY_URL's origin only:
//
//   - adds Authorization: Bearer $RELAY_TOKEN, as relay's /api/v1/mcp
//     answers 401 without it;
//   - when MCP_PROTOCOL_VERSION is set, offers that version in `initialize`
//     instead of the SDK's latest: the suite's --spec-version only picks
//     scenarios, so without this a "2025-06-18" run would speak 2025-11-25.
const token = process.env.RELAY_TOKEN;
if (!token || !process.env.RELAY_URL) {
  throw new Error("preload.mjs: set RELAY_URL and RELAY_TOKEN");
}
const origin = new URL(process.env.RELAY_URL).origin;
const version = process.env.MCP_PROTOCOL_VERSION;

function pinVersion(body) {
  if (!version || typeof body !== "string") return body;
  let msg;
  try {
    msg = JSON.parse(body);
  } catch {
    return body;
  }
  if (msg?.method !== "initialize" || !msg.params) return body;
  msg.params.protocolVersion = version;
  return JSON.stringify(msg);
}

const inner = globalThis.fetch;
globalThis.fetch = function fetchForRelay(input, init = {}) {
  const url = new URL(input instanceof Request ? input.url : input);
  if (url.origin !== origin) return inner(input, init);
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  if (!headers.has("authorization")) headers.set("authorization", `Bearer ${token}`);
  const next = { ...init, headers };
  if (init.body !== undefined) next.body = pinVersion(init.body);
  return inner(input, next);
};
