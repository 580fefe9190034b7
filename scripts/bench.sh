#!/usr/bin/env bash
# make bench: the service's create and replay side by side, in one run, with
# pgbench running the fixed reference SQL (bench/reference/, one statement
# per round trip) at the same client count, on a PRIVATE PostgreSQL cluster
# this script starts (initdb in a temporary directory, a free port,
# pg_stat_statements preloaded) and tears down at exit, so that nothing else
# runs on it and the CPU of its processes is this benchmark's. Prints the
# four figures of issue 26: create and replay throughput ratios against the
# reference, the p99 of create, the database cost ratio (postgres CPU per
# created payment ÷ per reference transaction) and WAL bytes per payment
# against per reference transaction. See docs/BENCHMARKS.md.
#
# Environment: BENCH_CLIENTS (16), BENCH_SECONDS (15), BENCH_BIN (bin: the
# directory of the binaries; bin is built first, another is used as is, e.g.
# an older commit's build for a before/after), BENCH_PG_BIN
# (/usr/lib/postgresql/15/bin), BENCH_OUT (bin/bench: logs, pgbench and
# loadgen outputs, pg_stat_statements of each window), BENCH_OUTBOX_RELAY
# (on: a private nats-server for the outbox relay when nats-server is
# installed; off), BENCH_KEEP=1 leaves the stack and the cluster running for
# scripts/bench-growth.sh and writes $OUT/env (PGHOST, PGPORT, the data
# directory), $OUT/pids and the tenant's API key $OUT/api_key (mode 600),
# BENCH_PPROF_ADDR serves the pod's profiles there (PPROF_ADDR), to profile
# it under load, BENCH_SVC_ENV: extra VAR=value words for the service.
# BENCH_PARSE_ONLY=DIR only parses and prints the figures from the outputs
# of an earlier run in DIR (the smoke test of this script's parsing).
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS="${BENCH_CLIENTS:-16}"
SECONDS_RUN="${BENCH_SECONDS:-15}"
BIN="${BENCH_BIN:-bin}"
PGBIN="${BENCH_PG_BIN:-/usr/lib/postgresql/15/bin}"
RELAY="${BENCH_OUTBOX_RELAY:-on}"
OUT="${BENCH_OUT:-bin/bench}"
DBNAME=paymentsvc_bench

say() { printf '\n== %s\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

# report DIR: the figures from the outputs of a run (pgbench_*.out,
# loadgen_*.out, window_*.txt, machine.txt).
report() {
	local d=$1 name
	declare -A tps avg p99 cnt cpu wal
	for name in create replay; do
		tps[ref_$name]=$(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' "$d/pgbench_$name.out")
		avg[ref_$name]=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$d/pgbench_$name.out")
		cnt[ref_$name]=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$d/pgbench_$name.out")
		p99[ref_$name]=$(cat "$d/pgbench_$name.p99")
		local j
		j=$(tail -1 "$d/loadgen_$name.out")
		tps[svc_$name]=$(jq -r .rps <<<"$j")
		avg[svc_$name]=$(jq -r .mean_ms <<<"$j")
		p99[svc_$name]=$(jq -r .p99_ms <<<"$j")
		if [ "$name" = create ]; then cnt[svc_$name]=$(jq -r .payments <<<"$j"); else cnt[svc_$name]=$(jq -r .requests <<<"$j"); fi
		local w
		for w in ref_$name svc_$name; do
			# window_W.txt: "cpu_seconds wal_bytes"
			read -r cpu[$w] wal[$w] <"$d/window_$w.txt"
		done
	done
	per() { awk -v a="$1" -v n="$2" -v m="$3" 'BEGIN { if (n > 0) printf "%.1f", a * m / n; else print "-" }'; }
	cat "$d/machine.txt"
	printf '%-7s | %-44s | %-44s | %s\n' "c=$CLIENTS" "reference (bench/reference, pgbench)" "paymentsvc (cmd/loadgen)" "service / reference"
	printf '%-7s | %-44s | %-44s | %s\n' "-------" "--------------------------------------------" "--------------------------------------------" "-------------------"
	for name in create replay; do
		local r=ref_$name s=svc_$name
		printf '%-7s | %7.0f/s avg %6.2f p99 %7.2f ms %-11s | %7.0f/s avg %6.2f p99 %7.2f ms %-11s | throughput %s×\n' "$name" \
			"${tps[$r]}" "${avg[$r]}" "${p99[$r]}" "${cnt[$r]} tx" "${tps[$s]}" "${avg[$s]}" "${p99[$s]}" "${cnt[$s]} $([ $name = create ] && echo pay || echo req)" \
			"$(ratio "${tps[$s]}" "${tps[$r]}")"
	done
	declare -A cpt wpt # postgres CPU µs and WAL bytes per transaction or operation
	local w
	for w in ref_create svc_create ref_replay svc_replay; do
		cpt[$w]=$(per "${cpu[$w]}" "${cnt[$w]}" 1000000)
		wpt[$w]=$(per "${wal[$w]}" "${cnt[$w]}" 1)
	done
	for name in create replay; do
		local r=ref_$name s=svc_$name
		printf '%-7s | postgres CPU %7s µs/tx, WAL %7s B/tx     | postgres CPU %7s µs/op, WAL %7s B/op     | DB cost %s×, WAL %s×\n' \
			"$name" "${cpt[$r]}" "${wpt[$r]}" "${cpt[$s]}" "${wpt[$s]}" "$(ratio "${cpt[$s]}" "${cpt[$r]}")" "$(ratio "${wpt[$s]}" "${wpt[$r]}")"
	done
	echo
	echo "create throughput ratio: $(ratio "${tps[svc_create]}" "${tps[ref_create]}")× (goal ≥ 1.0)"
	echo "replay throughput ratio: $(ratio "${tps[svc_replay]}" "${tps[ref_replay]}")× (goal ≥ 0.6)"
	echo "create p99 at $CLIENTS clients: $(printf %.1f "${p99[svc_create]}") ms (goal ≤ 25)"
	echo "database cost ratio (postgres CPU per created payment ÷ per reference create): ${cpt[svc_create]} µs ÷ ${cpt[ref_create]} µs = $(ratio "${cpt[svc_create]}" "${cpt[ref_create]}")× (goal ≤ 1.0)"
	echo "WAL per created payment ÷ per reference create: ${wpt[svc_create]} B ÷ ${wpt[ref_create]} B = $(ratio "${wpt[svc_create]}" "${wpt[ref_create]}")×"
	[ -f "$d/extra.txt" ] && cat "$d/extra.txt"
	return 0
}

if [ -n "${BENCH_PARSE_ONLY:-}" ]; then
	report "$BENCH_PARSE_ONLY"
	exit 0
fi

mkdir -p "$OUT"
rm -f "$OUT"/pgbench_* "$OUT"/loadgen_* "$OUT"/window_* "$OUT"/pgss_* "$OUT"/extra.txt

# (a) tools: pgbench and the server come with postgresql-15; jq.
[ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pgbench" ] || {
	say "installing postgresql-15"
	apt-get update && apt-get install -y postgresql-15
}
command -v jq >/dev/null || { apt-get update && apt-get install -y jq; }
if [ "$RELAY" = on ] && ! command -v nats-server >/dev/null; then
	echo "bench: no nats-server: the outbox relay stays off" >&2
	RELAY=off
fi

# (b) the binaries
if [ "$BIN" = bin ]; then
	say "building"
	make -s build
fi

# (c) the private cluster: initdb as a non-root user (postgres when run as root).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PGTMP=$(mktemp -d /tmp/paymentsvc-bench-pg.XXXXXX)
asdb=()
if [ "$(id -u)" = 0 ]; then
	chown postgres "$PGTMP"
	asdb=(runuser -u postgres --)
fi
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	"${asdb[@]}" "$PGBIN/pg_ctl" -D "$PGTMP/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$PGTMP"
}
if [ "${BENCH_KEEP:-0}" != 1 ]; then
	trap cleanup EXIT
else
	trap 'rc=$?; [ "$rc" = 0 ] || cleanup' EXIT # kept only when the run succeeded
fi

PORT=$(free_port)
say "private cluster in $PGTMP, port $PORT"
"${asdb[@]}" "$PGBIN/initdb" -D "$PGTMP/data" -U postgres -A trust -E UTF8 --no-sync >"$OUT/initdb.log" 2>&1 ||
	{ cat "$OUT/initdb.log" >&2; exit 1; }
"${asdb[@]}" "$PGBIN/pg_ctl" -D "$PGTMP/data" -l "$PGTMP/postgres.log" -w -o \
	"-p $PORT -c listen_addresses=127.0.0.1 -k $PGTMP -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all -c max_connections=200 -c shared_buffers=256MB" \
	start >/dev/null
export PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres
POSTMASTER=$(head -1 "$PGTMP/data/postmaster.pid")
DBURL="postgres://postgres@127.0.0.1:${PORT}/${DBNAME}?sslmode=disable"
PSQL=("$PGBIN/psql" -qX -v ON_ERROR_STOP=1)

# pgcpu: CPU seconds of the cluster's processes so far: the postmaster's own
# and its reaped children's (cutime, cstime: the backends that exited), plus
# its live children's.
TCK=$(getconf CLK_TCK)
pgcpu() {
	local pm=$POSTMASTER t=0 f line rest pid
	for f in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null <"$f" || continue
		pid=${f#/proc/} pid=${pid%/stat}
		rest=${line##*) }
		# shellcheck disable=SC2086
		set -- $rest # $1 state, $2 ppid, ... $12 utime, $13 stime, $14 cutime, $15 cstime
		if [ "$pid" = "$pm" ]; then
			t=$((t + ${12} + ${13} + ${14} + ${15}))
		elif [ "$2" = "$pm" ]; then
			t=$((t + ${12} + ${13}))
		fi
	done
	echo "$t"
}
lsn() { "${PSQL[@]}" -Atd "$DBNAME" -c 'SELECT pg_current_wal_lsn()'; }
# window_start / window_end NAME: postgres CPU and WAL over a run.
window_start() {
	"${PSQL[@]}" -d "$DBNAME" -c 'SELECT pg_stat_statements_reset()' -c 'SELECT pg_stat_reset_shared($$wal$$)' >/dev/null
	w_lsn=$(lsn)
	w_cpu=$(pgcpu)
}
window_end() {
	local cpu1 lsn1
	# pgbench's backends exit when it does: wait until they are gone and
	# reaped, so their CPU is in the postmaster's cutime (read in the middle
	# of their exit, a backend's CPU would be in neither).
	for _ in $(seq 1 100); do
		[ "$("${PSQL[@]}" -Atd "$DBNAME" -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")" = 0 ] && break
		sleep 0.1
	done
	sleep 0.5
	cpu1=$(pgcpu)
	lsn1=$(lsn)
	echo "$(awk -v a="$w_cpu" -v b="$cpu1" -v t="$TCK" 'BEGIN { printf "%.3f", (b - a) / t }') $("${PSQL[@]}" -Atd "$DBNAME" -c "SELECT pg_wal_lsn_diff('$lsn1', '$w_lsn')::bigint")" >"$OUT/window_$1.txt"
	"${PSQL[@]}" -d "$DBNAME" -c "SELECT calls, round(total_exec_time::numeric, 1) AS total_ms, round((total_exec_time / calls)::numeric, 3) AS mean_ms, rows, shared_blks_hit + shared_blks_read AS blks, wal_records, wal_bytes, left(regexp_replace(query, '\s+', ' ', 'g'), 160) AS query FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 30" >"$OUT/pgss_$1.txt" 2>&1 || true
	"${PSQL[@]}" -d "$DBNAME" -c "SELECT * FROM pg_stat_wal" >>"$OUT/pgss_$1.txt" 2>&1 || true
}

# (d) the database, the reference schema, the simulator at 0 ms, the service, a tenant
say "database $DBNAME"
"${PSQL[@]}" -d postgres -c "CREATE DATABASE $DBNAME"
"${PSQL[@]}" -d "$DBNAME" -c 'CREATE EXTENSION pg_stat_statements'
DATABASE_URL="$DBURL" "$BIN/paymentsvc" migrate 2>"$OUT/migrate.log"
"${PSQL[@]}" -d "$DBNAME" -f bench/reference/schema.sql >/dev/null

SIM_ADDR="127.0.0.1:$(free_port)"
HTTP_ADDR="127.0.0.1:$(free_port)"
SIM_ADDR="$SIM_ADDR" SIM_LATENCY=0s "$BIN/providersim" >"$OUT/providersim.log" 2>&1 &
pids+=($!)
nats_url=nats://127.0.0.1:1
if [ "$RELAY" = on ]; then
	nats_port=$(free_port)
	nats_url="nats://127.0.0.1:${nats_port}"
	nats-server -a 127.0.0.1 -p "$nats_port" -js -sd "$PGTMP/nats" >"$OUT/nats.log" 2>&1 &
	pids+=($!)
fi
# shellcheck disable=SC2086
env DATABASE_URL="$DBURL" HTTP_ADDR="$HTTP_ADDR" PROVIDER_URL="http://$SIM_ADDR" PROVIDER_API_KEY=sk_sim \
	AUTO_MIGRATE=false OUTBOX_RELAY="$RELAY" NATS_URL="$nats_url" TENANT_RATE_LIMIT=0 SHUTDOWN_DRAIN_DELAY=0s \
	PPROF_ADDR="${BENCH_PPROF_ADDR:-}" CONSOLE_ADDR=off ${BENCH_SVC_ENV:-} \
	"$BIN/paymentsvc" serve >"$OUT/paymentsvc.log" 2>&1 &
svc=$!
pids+=($svc)
for _ in $(seq 1 100); do
	"$BIN/paymentsvc" healthcheck --url "http://$HTTP_ADDR/healthz" >/dev/null 2>&1 && break
	kill -0 "$svc" 2>/dev/null || { tail -5 "$OUT/paymentsvc.log" >&2; exit 1; }
	sleep 0.1
done
tenant=$(DATABASE_URL="$DBURL" "$BIN/paymentsvc" tenant create --name bench 2>>"$OUT/migrate.log")
key=$(printf '%s' "$tenant" | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')
[ -n "$key" ] || { echo "bench: no tenant key" >&2; exit 1; }

# Which commit the binaries are of: this checkout's for bin, built here;
# BENCH_BIN's are not known to this script.
built="built from $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
[ "$BIN" = bin ] || built="given by BENCH_BIN"
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $("${PSQL[@]}" -Atd "$DBNAME" -c 'SHOW server_version') (private cluster), $(date -u '+%Y-%m-%d %H:%M UTC'), $CLIENTS clients, ${SECONDS_RUN}s per run, binaries $BIN ($built)" >"$OUT/machine.txt"

# ref_run NAME: pgbench on bench/reference/NAME.sql
ref_run() {
	local name=$1 log="$OUT/pgbench_$1_log"
	say "reference $name (pgbench): -c $CLIENTS -T $SECONDS_RUN (load $(load))"
	window_start
	"$PGBIN/pgbench" -n -M prepared -c "$CLIENTS" -j 2 -T "$SECONDS_RUN" -f "bench/reference/$name.sql" \
		--log --log-prefix="$log" "$DBNAME" >"$OUT/pgbench_$name.out" 2>&1 ||
		{ cat "$OUT/pgbench_$name.out" >&2; exit 1; }
	window_end "ref_$name"
	grep -E 'tps|latency|processed|failed' "$OUT/pgbench_$name.out" >&2
	# per-transaction log: client_id transaction_no time_us script_no epoch us
	cat "$log".* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {i=int(NR*0.99+0.999999); if (i<1) i=1; printf "%.2f\n", a[i]/1000}' >"$OUT/pgbench_$name.p99"
	rm -f "$log".*
}

# svc_run MODE: cmd/loadgen against the service
svc_run() {
	local mode=$1
	say "paymentsvc $mode (loadgen): -c $CLIENTS -d ${SECONDS_RUN}s (load $(load))"
	window_start
	# create checks the money at the end (the simulator's charges against
	# the payments' statuses: one query, a negligible part of the window).
	local check=()
	[ "$mode" = create ] && check=(-sim-url "http://$SIM_ADDR" -database-url "$DBURL")
	"$BIN/loadgen" -url "http://$HTTP_ADDR" -api-key "$key" -mode "$mode" -c "$CLIENTS" -d "${SECONDS_RUN}s" "${check[@]}" \
		>"$OUT/loadgen_$mode.out" 2>&1 ||
		{ cat "$OUT/loadgen_$mode.out" >&2; echo "bench: loadgen $mode failed" >&2; exit 1; }
	window_end "svc_$mode"
	head -n -1 "$OUT/loadgen_$mode.out" >&2
}

ref_run create
svc_run create
ref_run replay
svc_run replay

{
	echo "paymentsvc peak RSS: $(awk '/^VmHWM/ {printf "%.1f MiB", $2 / 1024}' "/proc/$svc/status") (goal ≤ 100 MiB)"
	echo "load average (1, 5, 15 min) at the end: $(load)"
	echo "postgres: pg_stat_statements of each window in $OUT/pgss_*.txt"
} >"$OUT/extra.txt"

echo
report "$OUT"
if [ "${BENCH_KEEP:-0}" = 1 ]; then
	echo "BENCH_KEEP=1: still running: pids ${pids[*]} (in $OUT/pids), cluster $PGTMP/data on port $PORT; service http://$HTTP_ADDR, simulator http://$SIM_ADDR"
	echo "${pids[*]}" >"$OUT/pids"
	printf 'PGHOST=127.0.0.1\nPGPORT=%s\nPGDATA=%s\nPGTMP=%s\nHTTP_ADDR=%s\nSIM_ADDR=%s\nDBURL=%s\n' "$PORT" "$PGTMP/data" "$PGTMP" "$HTTP_ADDR" "$SIM_ADDR" "$DBURL" >"$OUT/env"
	(umask 077 && printf '%s' "$key" >"$OUT/api_key")
fi
