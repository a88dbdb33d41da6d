#!/usr/bin/env bash
# Runs the MCP conformance suite's server scenarios (all of them, pending
# included) against the streamable HTTP endpoint URL, with the expected
# failures of expected-failures.yml; exits non-zero on an unexpected failure
# or on an expected failure that passes. Extra arguments go to the runner
# (e.g. --scenario tools-list, -o DIR to keep each scenario's checks.json).
#
#   scripts/mcp-conformance/run.sh http://127.0.0.1:7700/mcp
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -ge 1 ]] || { echo "usage: $0 URL [conformance server options...]" >&2; exit 2; }
url="$1"
shift
dir="$("$here/install.sh")"
suite=(--suite all)
for a in "$@"; do
	[[ "$a" == --scenario ]] && suite=()
done
exec "$dir/bin/node" "$dir/node_modules/.bin/conformance" server --url "$url" "${suite[@]}" \
	--expected-failures "$here/expected-failures.yml" "$@"
