#!/usr/bin/env bash
# run.sh conformance|client|oauth: outside checks of relay's MCP endpoints against a
# fresh node (see README.md). Installs what it needs on first use (npm ci,
# Node 22 into .tools/), builds bin/relay, starts a node on a free loopback
# port with a throwaway data directory, runs the check, stops the node, and
# exits with the check's status. Prints one line on success, the details on
# failure.
set -euo pipefail

SPEC=2025-06-18        # the MCP spec version the conformance run targets
NODE_VERSION=22.23.3   # the conformance suite wants Node >= 22

usage() { echo "usage: $0 conformance|client|oauth" >&2; exit 2; }
[ $# -eq 1 ] || usage
mode=$1
case $mode in conformance | client | oauth) ;; *) usage ;; esac

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
node=$here/.tools/node_modules/.bin/node
suite=$here/node_modules/@modelcontextprotocol/conformance/dist/index.js
cd "$here"

work=$(mktemp -d "${TMPDIR:-/tmp}/relay-mcpcheck.XXXXXX")
pid=
stop_node() {
	[ -n "$pid" ] || return 0
	local rc=0
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" || rc=$?
	pid=
	return "$rc"
}
trap 'stop_node || true; rm -rf "$work"' EXIT

# quietly runs a command, showing its output only when it fails.
quietly() {
	if ! "$@" >"$work/step.log" 2>&1; then
		echo "run.sh: failed: $*" >&2
		cat "$work/step.log" >&2
		return 1
	fi
}

# Install: the locked packages, and Node 22 next to them.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	quietly npm ci --no-audit --no-fund
fi
if [ "$("$node" --version 2>/dev/null)" != "v$NODE_VERSION" ]; then
	quietly npm install --prefix "$here/.tools" --no-save --no-audit --no-fund "node@$NODE_VERSION"
fi

# Build and start a node on a port the kernel picks; it prints its URL. No
# p2p: the default would listen on port 4001 of every interface, taken by any
# node already running there.
(cd "$root" && quietly "${GO:-go}" build -o bin/relay ./cmd/relay)
"$root/bin/relay" serve --data "$work/data" --http 127.0.0.1:0 --no-p2p >"$work/relay.log" 2>&1 &
pid=$!
url=
for _ in $(seq 300); do
	url=$(sed -n 's/^realm .* serving at \(http:[^ ]*\).*/\1/p' "$work/relay.log")
	[ -n "$url" ] && [ -s "$work/data/operator.token" ] && break
	if ! kill -0 "$pid" 2>/dev/null; then break; fi
	sleep 0.1
done
if [ -z "$url" ] || [ ! -s "$work/data/operator.token" ]; then
	echo "run.sh: the node did not start:" >&2
	cat "$work/relay.log" >&2
	exit 1
fi
export RELAY_URL=$url

status=0
case $mode in
conformance)
	# The suite's client sends no credentials: preload.mjs adds the operator
	# token and pins initialize to $SPEC (--spec-version only filters the
	# scenario list; with --scenario it is checked and otherwise ignored).
	RELAY_TOKEN=$(cat "$work/data/operator.token")
	export RELAY_TOKEN MCP_PROTOCOL_VERSION=$SPEC
	run_node() { "$node" --import "$here/preload.mjs" "$@"; }

	# Scenarios that apply to a stateless, tools-only server; the ones for a
	# declared capability only when the server declares it. The others need
	# the suite's fixture tools, resources and prompts (test_*, test://…), or
	# server-to-client requests and streams that stateless JSON responses
	# cannot carry: README.md lists them.
	scenarios=(server-initialize ping tools-list)
	caps=$(run_node --input-type=module -e '
		const r = await fetch(new URL("/api/v1/mcp", process.env.RELAY_URL), {
			method: "POST",
			headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
			body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {
				protocolVersion: process.env.MCP_PROTOCOL_VERSION, capabilities: {},
				clientInfo: { name: "relay-mcpcheck", version: "1.0.0" } } }),
		});
		const m = await r.json();
		if (!m.result) throw new Error(`initialize: HTTP ${r.status}: ${JSON.stringify(m)}`);
		console.log(Object.keys(m.result.capabilities).join(" "));')
	for c in $caps; do
		case $c in
		logging) scenarios+=(logging-set-level) ;;
		resources) scenarios+=(resources-list) ;;
		prompts) scenarios+=(prompts-list) ;;
		esac
	done

	listed=$(run_node "$suite" list --server --spec-version "$SPEC")
	failed=()
	for s in "${scenarios[@]}"; do
		if ! grep -q -- "- $s \[" <<<"$listed"; then
			echo "run.sh: scenario $s is not in the suite's list for $SPEC" >&2
			failed+=("$s")
			continue
		fi
		if ! run_node "$suite" server --url "$url/api/v1/mcp" --scenario "$s" --spec-version "$SPEC" >"$work/$s.log" 2>&1; then
			failed+=("$s")
			cat "$work/$s.log"
		elif ! grep -q ', 0 warnings' "$work/$s.log"; then
			cat "$work/$s.log" # passed with warnings: worth reading
		fi
	done
	if [ ${#failed[@]} -gt 0 ]; then
		echo "mcp-conformance: ${#failed[@]} of ${#scenarios[@]} scenarios failed (spec $SPEC): ${failed[*]}" >&2
		status=1
	else
		echo "mcp-conformance: ${#scenarios[@]} scenarios passed (spec $SPEC): ${scenarios[*]}"
	fi
	;;
client)
	token=$("$root/bin/relay" token issue --node "$url" --operator-token-file "$work/data/operator.token" \
		--label ts-client --rights write 2>"$work/token.log") || {
		cat "$work/token.log" >&2
		exit 1
	}
	RELAY_TOKEN=$token "$node" client.mjs || status=$?
	;;
oauth)
	# The corpus's /mcp: the client gets its own token by OAuth 2.1.
	"$node" oauth-client.mjs || status=$?
	;;
esac

# A node that does not stop cleanly on SIGTERM fails the run too.
if ! stop_node; then
	echo "run.sh: the node did not stop cleanly:" >&2
	cat "$work/relay.log" >&2
	status=1
fi
exit "$status"
