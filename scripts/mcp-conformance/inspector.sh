#!/usr/bin/env bash
# Runs the MCP Inspector's CLI (mcp-inspector --cli) on Node 22 at the pinned
# version; all arguments go to it.
#
#   scripts/mcp-conformance/inspector.sh http://127.0.0.1:7700/mcp --method tools/list
#   scripts/mcp-conformance/inspector.sh --method tools/list -- memento mcp --data ./memento-data
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$("$here/install.sh")"
exec "$dir/bin/node" "$dir/node_modules/.bin/mcp-inspector" --cli "$@"
