#!/usr/bin/env bash
# The whole test suite: gofmt, go mod tidy, go vet, go test -race against
# real PostgreSQL, Redis and a Redis Cluster. Uses the servers on 127.0.0.1
# when they answer (PostgreSQL: user postgres without a password, database
# test, created if missing); otherwise starts its own from the installed
# binaries in a temporary directory, on that port or, if something else holds
# it, on a free one. The Redis Cluster (three masters, no replicas) is always
# its own, on free loopback ports, unless MEMENTO_TEST_REDIS_CLUSTER_URL names
# one. Installs Debian's postgresql, redis-server, redis-tools, gcc (for -race)
# and curl (the HTTP guide's examples) when missing, as root. Stops exactly
# what it started, on exit.
#
# The MCP clients of cmd/memento's TestMCPClients (the MCP conformance suite
# and the MCP Inspector, on Node 22, at the versions
# scripts/mcp-conformance/package-lock.json pins) are installed by
# scripts/mcp-conformance/install.sh into a cache outside the repository,
# once per lock; that needs npm (Debian's nodejs and npm are installed when
# missing, as root) and the npm registry.
#
# Environment:
#   MEMENTO_TEST_PG_PORT      PostgreSQL port to use or start (default 5432)
#   MEMENTO_TEST_REDIS_PORT   Redis port to use or start (default 6379)
#   MEMENTO_TEST_POSTGRES_URL / MEMENTO_TEST_REDIS_URL  use these servers as
#                             they are (nothing is probed or started)
#   MEMENTO_TEST_REDIS_CLUSTER_URL  use this Redis Cluster as it is, in
#                             go-redis's form redis://h1:p1?addr=h2:p2&addr=h3:p3
#   MEMENTO_TEST_TIMEOUT      go test -timeout per package (default 25m)
#   MEMENTO_TEST_PACKAGES     packages to test (default ./...)
#   MEMENTO_TEST_MCP_CLIENTS  use this install of scripts/mcp-conformance as it
#                             is (what its install.sh prints)
#   MEMENTO_MCP_CLIENTS_CACHE where install.sh keeps installs (default
#                             ${XDG_CACHE_HOME:-$HOME/.cache}/memento/mcp-conformance)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PG_PORT="${MEMENTO_TEST_PG_PORT:-5432}"
REDIS_PORT="${MEMENTO_TEST_REDIS_PORT:-6379}"
GO_TIMEOUT="${MEMENTO_TEST_TIMEOUT:-25m}"
PACKAGES="${MEMENTO_TEST_PACKAGES:-./...}"

log() { printf 'test.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# What this script started, so the EXIT trap stops only that.
WORKDIR=""
PG_DATA=""
PG_PID=""
REDIS_PID=""
REDIS_CLUSTER_PIDS=()
APT_UPDATED=""
PG_PORT_AUTO=""

cleanup() {
	local rc=$?
	set +e
	local pid
	for pid in "${REDIS_CLUSTER_PIDS[@]}"; do
		log "stopping the Redis Cluster node it started (pid $pid)"
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	if [[ -n "$REDIS_PID" ]]; then
		log "stopping the Redis it started (pid $REDIS_PID)"
		kill "$REDIS_PID" 2>/dev/null
		wait "$REDIS_PID" 2>/dev/null
	fi
	if [[ -n "$PG_PID" ]]; then
		log "stopping the PostgreSQL it started (pid $PG_PID)"
		as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			kill "$PG_PID" 2>/dev/null
		# pg_ctl has waited for the postmaster; make sure it is gone.
		for _ in $(seq 50); do kill -0 "$PG_PID" 2>/dev/null || break; sleep 0.1; done
	fi
	if [[ -n "$WORKDIR" ]]; then
		rm -rf "$WORKDIR"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

is_root() { [[ "$(id -u)" == 0 ]]; }

apt_install() {
	is_root || die "$* missing and not running as root: install Debian's packages $* (apt-get install $*)"
	command -v apt-get >/dev/null || die "$* missing and apt-get is not available"
	if [[ -z "$APT_UPDATED" ]]; then
		log "apt-get update"
		apt-get update -qq >&2
		APT_UPDATED=1
	fi
	log "apt-get install $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# --- Go -----------------------------------------------------------------------
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null || die "the Go toolchain (go) is not on PATH nor in /usr/local/go/bin"
# The race detector needs cgo, so a C compiler.
if ! command -v "$(go env CC)" >/dev/null; then
	apt_install gcc libc6-dev
fi
export CGO_ENABLED=1
# The HTTP guide's examples (TestHTTPGuide in cmd/memento) run with curl.
command -v curl >/dev/null || apt_install curl
GOFMT="$(go env GOROOT)/bin/gofmt"
[[ -x "$GOFMT" ]] || GOFMT=gofmt

# --- probes ---------------------------------------------------------------------
# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() { timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# redis_answers PORT: a Redis server answers PING on 127.0.0.1:PORT.
# shellcheck disable=SC2016 # expanded by the inner shell
redis_answers() {
	timeout 3 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "PING\r\n" >&3
		IFS= read -r -t 2 line <&3 || exit 1
		[[ "$line" == +PONG* ]]' _ "$1" 2>/dev/null
}

# pg_bindir: the directory of the newest installed PostgreSQL server binaries.
pg_bindir() {
	local d
	d="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
	if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
		echo "$d"
		return 0
	fi
	if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
		dirname "$(command -v initdb)"
		return 0
	fi
	return 1
}

# pg_answers PORT: PostgreSQL accepts connections on 127.0.0.1:PORT.
pg_answers() {
	local isready=""
	if [[ -n "${PG_BIN:-}" && -x "$PG_BIN/pg_isready" ]]; then
		isready="$PG_BIN/pg_isready"
	elif command -v pg_isready >/dev/null; then
		isready=pg_isready
	fi
	if [[ -n "$isready" ]]; then
		"$isready" -q -h 127.0.0.1 -p "$1" -t 3
	else
		port_open "$1"
	fi
}

# as_pg CMD...: run CMD as the postgres user when root (initdb refuses root).
as_pg() {
	if is_root; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

psql_bin() {
	if [[ -n "${PG_BIN:-}" && -x "$PG_BIN/psql" ]]; then
		echo "$PG_BIN/psql"
	elif command -v psql >/dev/null; then
		command -v psql
	fi
}

# pg_usable PORT: the server at PORT lets user postgres in without a password
# (trust) and has a database "test" (created if missing).
pg_usable() {
	local psql have
	psql="$(psql_bin)"
	if [[ -z "$psql" ]]; then
		log "no psql client: assuming trust auth and a database test on port $1"
		return 0
	fi
	have="$(PGCONNECT_TIMEOUT=5 "$psql" -X -q -w -h 127.0.0.1 -p "$1" -U postgres -d postgres -Atc \
		"SELECT 1 FROM pg_database WHERE datname = 'test'" 2>/dev/null)" || return 1
	if [[ "$have" != 1 ]]; then
		log "creating database test on port $1"
		"$psql" -X -q -w -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "CREATE DATABASE test" >/dev/null || return 1
	fi
}

# free_port BASE: the first port from BASE on that nothing listens on. Callers
# pick bases below Linux's ephemeral range (32768-60999), where the source
# port of some other loopback connection could hold the port without a listener.
free_port() {
	local p
	for ((p = $1; p < $1 + 200; p++)); do
		port_open "$p" || { echo "$p"; return 0; }
	done
	die "no free port from $1"
}

# free_ports N BASE: N distinct ports from BASE on that nothing listens on.
free_ports() {
	local n=$1 p=$2 out=()
	while ((${#out[@]} < n)); do
		p="$(free_port "$p")"
		out+=("$p")
		p=$((p + 1))
	done
	echo "${out[@]}"
}

workdir() {
	if [[ -z "$WORKDIR" ]]; then
		WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/memento-test.XXXXXX")"
		chmod 755 "$WORKDIR"
	fi
}

start_postgres() {
	workdir
	if is_root && ! id postgres >/dev/null 2>&1; then
		log "creating the postgres system user"
		useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/bash postgres
	fi
	local dir="$WORKDIR/pg"
	mkdir -p "$dir"
	is_root && chown postgres: "$dir"
	PG_DATA="$dir/data"
	log "starting PostgreSQL ($PG_BIN) on 127.0.0.1:$PG_PORT in $dir"
	as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; die "initdb failed"; }
	# A throwaway server: durability off for speed, room for parallel packages.
	local try
	for try in 1 2 3 4 5; do
		if as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$dir/server.log" -w -t 60 \
			-o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $dir -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
			start >/dev/null; then
			break
		fi
		# A port picked by free_port can be taken before the server binds it.
		if [[ -n "$PG_PORT_AUTO" && "$try" -lt 5 ]] && grep -q "Address already in use" "$dir/server.log"; then
			PG_PORT="$(free_port $((25432 + RANDOM % 2000)))"
			log "port taken meanwhile; trying 127.0.0.1:$PG_PORT"
			continue
		fi
		cat "$dir/server.log" >&2 || true
		die "PostgreSQL did not start on port $PG_PORT"
	done
	PG_PID="$(head -n 1 "$PG_DATA/postmaster.pid")"
	as_pg "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres test
	log "PostgreSQL started (pid $PG_PID)"
}

start_redis() {
	workdir
	local dir="$WORKDIR/redis"
	mkdir -p "$dir"
	log "starting Redis on 127.0.0.1:$REDIS_PORT"
	redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
		--dir "$dir" --daemonize no --logfile "$dir/redis.log" &
	REDIS_PID=$!
	for _ in $(seq 100); do
		redis_answers "$REDIS_PORT" && break
		kill -0 "$REDIS_PID" 2>/dev/null || { cat "$dir/redis.log" >&2; REDIS_PID=""; die "redis-server exited"; }
		sleep 0.1
	done
	redis_answers "$REDIS_PORT" || { cat "$dir/redis.log" >&2; die "Redis did not answer on port $REDIS_PORT"; }
	log "Redis started (pid $REDIS_PID)"
}

# start_redis_cluster: three masters on free loopback ports (and free cluster
# bus ports: the default, port + 10000, may be taken), slots spread by
# redis-cli --cluster create; waits for cluster_state:ok.
start_redis_cluster() {
	workdir
	local ports bus i p dir info=""
	read -r -a ports <<<"$(free_ports 6 $((29432 + RANDOM % 2000)))"
	bus=("${ports[@]:3:3}")
	ports=("${ports[@]:0:3}")
	for i in 0 1 2; do
		p="${ports[$i]}"
		dir="$WORKDIR/redis-cluster/$p"
		mkdir -p "$dir"
		redis-server --bind 127.0.0.1 --port "$p" --cluster-enabled yes --cluster-port "${bus[$i]}" \
			--cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 5000 --save "" --appendonly no \
			--dir "$dir" --daemonize no --logfile "$dir/redis.log" &
		REDIS_CLUSTER_PIDS+=($!)
	done
	log "starting a Redis Cluster on 127.0.0.1:${ports[*]} (bus ${bus[*]}; pids ${REDIS_CLUSTER_PIDS[*]})"
	for p in "${ports[@]}"; do
		for _ in $(seq 100); do
			redis_answers "$p" && break
			sleep 0.1
		done
		redis_answers "$p" || { cat "$WORKDIR/redis-cluster/$p/redis.log" >&2; die "Redis Cluster node did not answer on port $p"; }
	done
	redis-cli --cluster create "127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}" \
		--cluster-replicas 0 --cluster-yes >"$WORKDIR/redis-cluster/create.log" 2>&1 ||
		{ cat "$WORKDIR/redis-cluster/create.log" >&2; die "redis-cli --cluster create failed"; }
	for _ in $(seq 150); do
		info="$(redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info 2>/dev/null || true)"
		[[ "$info" == *cluster_state:ok* ]] && break
		sleep 0.2
	done
	[[ "$info" == *cluster_state:ok* ]] || { printf '%s\n' "$info" >&2; die "the Redis Cluster did not reach cluster_state:ok"; }
	export MEMENTO_TEST_REDIS_CLUSTER_URL="redis://127.0.0.1:${ports[0]}?addr=127.0.0.1:${ports[1]}&addr=127.0.0.1:${ports[2]}"
	log "Redis Cluster ready: $MEMENTO_TEST_REDIS_CLUSTER_URL"
}

# --- PostgreSQL -------------------------------------------------------------------
# A server on the port that refuses a password-less login (say a stock Debian
# cluster) is left alone: a private one is started on a free port instead.
if [[ -n "${MEMENTO_TEST_POSTGRES_URL:-}" ]]; then
	log "PostgreSQL: using MEMENTO_TEST_POSTGRES_URL as given"
else
	PG_BIN="$(pg_bindir || true)"
	if pg_answers "$PG_PORT" && pg_usable "$PG_PORT"; then
		log "PostgreSQL answers on 127.0.0.1:$PG_PORT"
	else
		if [[ -z "$PG_BIN" ]]; then
			apt_install postgresql
			PG_BIN="$(pg_bindir)" || die "no PostgreSQL server binaries after installing postgresql"
		fi
		# Installing the package may have started Debian's own cluster on this port.
		if pg_answers "$PG_PORT" && pg_usable "$PG_PORT"; then
			log "PostgreSQL answers on 127.0.0.1:$PG_PORT"
		else
			if port_open "$PG_PORT"; then
				log "something on 127.0.0.1:$PG_PORT does not let user postgres in without a password"
				PG_PORT="$(free_port $((25432 + RANDOM % 2000)))"
				PG_PORT_AUTO=1
			fi
			start_postgres
		fi
	fi
	export MEMENTO_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$PG_PORT/test?sslmode=disable"
fi

# --- Redis ------------------------------------------------------------------------
if [[ -n "${MEMENTO_TEST_REDIS_URL:-}" ]]; then
	log "Redis: using MEMENTO_TEST_REDIS_URL as given"
else
	if redis_answers "$REDIS_PORT"; then
		log "Redis answers on 127.0.0.1:$REDIS_PORT"
	else
		command -v redis-server >/dev/null || apt_install redis-server
		if redis_answers "$REDIS_PORT"; then
			log "Redis answers on 127.0.0.1:$REDIS_PORT"
		else
			if port_open "$REDIS_PORT"; then
				log "something on 127.0.0.1:$REDIS_PORT does not answer PING without a password"
				REDIS_PORT="$(free_port $((27432 + RANDOM % 2000)))"
			fi
			start_redis
		fi
	fi
	export MEMENTO_TEST_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
fi

# --- Redis Cluster ----------------------------------------------------------------
if [[ -n "${MEMENTO_TEST_REDIS_CLUSTER_URL:-}" ]]; then
	log "Redis Cluster: using MEMENTO_TEST_REDIS_CLUSTER_URL as given"
else
	command -v redis-server >/dev/null || apt_install redis-server
	command -v redis-cli >/dev/null || apt_install redis-tools
	start_redis_cluster
fi

# --- MCP clients -------------------------------------------------------------------
if [[ -n "${MEMENTO_TEST_MCP_CLIENTS:-}" ]]; then
	log "MCP clients: using MEMENTO_TEST_MCP_CLIENTS as given"
else
	command -v npm >/dev/null || apt_install nodejs npm
	log "MCP clients: Node 22, the MCP conformance suite and the MCP Inspector (scripts/mcp-conformance/install.sh)"
	MEMENTO_TEST_MCP_CLIENTS="$(scripts/mcp-conformance/install.sh)" ||
		die "could not install the MCP clients (scripts/mcp-conformance/install.sh)"
	export MEMENTO_TEST_MCP_CLIENTS
	log "MCP clients in $MEMENTO_TEST_MCP_CLIENTS"
fi

# --- checks and tests ---------------------------------------------------------------
log "gofmt"
# testdata may hold deliberately odd Go files.
unformatted="$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 |
	xargs -0 -r "$GOFMT" -l 2>&1)" || die "gofmt failed: $unformatted"
if [[ -n "$unformatted" ]]; then
	printf '%s\n' "$unformatted" >&2
	die "these files are not gofmt-formatted (run: gofmt -w <file>)"
fi

# go mod tidy -diff changes nothing on disk: it prints what tidy would
# change and fails if anything would.
log "go mod tidy -diff"
go mod tidy -diff || die "go.mod or go.sum is not tidy (run: go mod tidy)"
PEER=cmd/memento/internal/bench/dbospeer
if [[ -f "$PEER/go.mod" ]]; then
	(cd "$PEER" && go mod tidy -diff) || die "$PEER: go.mod or go.sum is not tidy (run: cd $PEER && go mod tidy)"
fi

log "go vet ./..."
go vet ./...
# The crash tests build the binary with its crash points; vet that build too.
go vet -tags memento_crashpoints ./cmd/memento/

# The benchmark peer is its own module (the product never depends on it):
# build it so it cannot rot, but do not run it here.
if [[ -f cmd/memento/internal/bench/dbospeer/go.mod ]]; then
	log "building cmd/memento/internal/bench/dbospeer"
	(cd cmd/memento/internal/bench/dbospeer && go vet ./... && go build -o /dev/null ./...)
fi

SOAK='^TestSoakRandomKills$'
MCPCLIENTS='^TestMCPClients$'
if [[ "$PACKAGES" == "./..." ]]; then
	# The random-kill soak and the MCP clients run on their own below,
	# verbosely, so the soak's kill count and invariants and each conformance
	# scenario's result show in the output.
	log "go test -race -count=1 -timeout $GO_TIMEOUT -skip $SOAK|$MCPCLIENTS ./..."
	go test -race -count=1 -timeout "$GO_TIMEOUT" -skip "$SOAK|$MCPCLIENTS" ./...
	log "go test -race -count=1 -v -run $SOAK ./examples/refund/ (SIGKILL soak, both backends)"
	go test -race -count=1 -timeout "$GO_TIMEOUT" -v -run "$SOAK" ./examples/refund/ |
		grep -E --line-buffered '^(=== RUN|--- |ok|FAIL|PASS)|^ +(--- |soak|[a-z_]+\.go:[0-9]+:)'
	log "go test -race -count=1 -v -run $MCPCLIENTS ./cmd/memento/ (MCP conformance suite against memento serve's /mcp; MCP Inspector CLI over HTTP and stdio)"
	go test -race -count=1 -timeout "$GO_TIMEOUT" -v -run "$MCPCLIENTS" ./cmd/memento/
else
	log "go test -race -count=1 -timeout $GO_TIMEOUT $PACKAGES"
	# shellcheck disable=SC2086 # PACKAGES may name several patterns.
	go test -race -count=1 -timeout "$GO_TIMEOUT" $PACKAGES
fi
