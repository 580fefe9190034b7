#!/usr/bin/env bash
# make bench: the service's create and replay next to pgbench running the
# same SQL one statement at a time (bench/pgbench/), at the same client
# count, on a fresh database; prints throughput, p99 and the ratios
# (service / pgbench). See docs/BENCHMARKS.md.
#
# Environment: BENCH_CLIENTS (16), BENCH_SECONDS (15), BENCH_DB
# (paymentsvc_bench, dropped and recreated), PGHOST/PGPORT/PGUSER
# (127.0.0.1/5432/postgres), BENCH_HTTP_ADDR (127.0.0.1:18480),
# BENCH_SIM_ADDR (127.0.0.1:19480), BENCH_NATS_PORT (14480: a private
# nats-server for the outbox relay, so the benchmark publishes into no shared
# stream; BENCH_OUTBOX_RELAY=off runs without it), BENCH_KEEP=1 leaves the
# service running for bench-growth.sh (it then prints what to kill),
# BENCH_KEEP=1 also writes their pids to $OUT/pids and the tenant's API
# key to $OUT/api_key (mode 600; bin/ is not committed),
# BENCH_VEGETA=RATE also runs vegeta at RATE requests/s on the replay.
# BENCH_PPROF_ADDR serves the pod's profiles there (PPROF_ADDR), to profile it under load.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS="${BENCH_CLIENTS:-16}"
SECONDS_RUN="${BENCH_SECONDS:-15}"
DBNAME="${BENCH_DB:-paymentsvc_bench}"
export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
HTTP_ADDR="${BENCH_HTTP_ADDR:-127.0.0.1:18480}"
SIM_ADDR="${BENCH_SIM_ADDR:-127.0.0.1:19480}"
NATS_PORT="${BENCH_NATS_PORT:-14480}"
RELAY="${BENCH_OUTBOX_RELAY:-on}"
DBURL="postgres://${PGUSER}@${PGHOST}:${PGPORT}/${DBNAME}?sslmode=disable"
OUT="${BENCH_OUT:-bin/bench}"
mkdir -p "$OUT"

say() { printf '\n== %s\n' "$*" >&2; }

# (a) pgbench: /usr/bin/pgbench is Debian's pg_wrapper (postgresql-client-common);
# the program itself comes with the server package (postgresql-15).
if ! pgbench --version >/dev/null 2>&1; then
	say "installing pgbench"
	apt-get update && { apt-get install -y postgresql-15 || apt-get install -y postgresql-contrib; }
fi
pgbench --version >&2
command -v jq >/dev/null || { apt-get update && apt-get install -y jq; }
if [ "$RELAY" = on ] && ! command -v nats-server >/dev/null; then
	echo "bench: no nats-server: the outbox relay stays off" >&2
	RELAY=off
fi

# (b) the binaries
say "building"
make -s build

# (c) a fresh database, the simulator at 0 ms, the service, a tenant
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
if [ "${BENCH_KEEP:-0}" != 1 ]; then trap cleanup EXIT; fi

say "database $DBNAME (dropped and recreated)"
psql -qX -d postgres -c "DROP DATABASE IF EXISTS \"$DBNAME\" WITH (FORCE)" -c "CREATE DATABASE \"$DBNAME\""
DATABASE_URL="$DBURL" bin/paymentsvc migrate 2>"$OUT/migrate.log"
psql -qX -v ON_ERROR_STOP=1 -d "$DBNAME" -f bench/pgbench/setup.sql

SIM_ADDR="$SIM_ADDR" SIM_LATENCY=0s bin/providersim >"$OUT/providersim.log" 2>&1 &
pids+=($!)
nats_url="nats://127.0.0.1:${NATS_PORT}"
if [ "$RELAY" = on ]; then
	rm -rf "$OUT/nats"
	nats-server -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$OUT/nats" >"$OUT/nats.log" 2>&1 &
	pids+=($!)
fi
DATABASE_URL="$DBURL" HTTP_ADDR="$HTTP_ADDR" PROVIDER_URL="http://$SIM_ADDR" PROVIDER_API_KEY=sk_sim \
	AUTO_MIGRATE=false OUTBOX_RELAY="$RELAY" NATS_URL="$nats_url" TENANT_RATE_LIMIT=0 SHUTDOWN_DRAIN_DELAY=0s \
	PPROF_ADDR="${BENCH_PPROF_ADDR:-}" \
	CONSOLE_ADDR=off bin/paymentsvc serve >"$OUT/paymentsvc.log" 2>&1 &
svc=$!
pids+=($svc)
for _ in $(seq 1 100); do
	bin/paymentsvc healthcheck --url "http://$HTTP_ADDR/healthz" >/dev/null 2>&1 && break
	kill -0 "$svc" 2>/dev/null || { tail -5 "$OUT/paymentsvc.log" >&2; exit 1; }
	sleep 0.1
done
tenant=$(DATABASE_URL="$DBURL" bin/paymentsvc tenant create --name bench 2>>"$OUT/migrate.log")
key=$(printf '%s' "$tenant" | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')
[ -n "$key" ] || { echo "bench: no tenant key" >&2; exit 1; }

machine() {
	echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(psql -XAtd "$DBNAME" -c 'SHOW server_version'), $(date -u '+%Y-%m-%d %H:%M UTC')"
}
load() { cut -d' ' -f1-3 /proc/loadavg; }

# pgbench_run NAME SCRIPT: prints "tps avg_ms p99_ms load"
pgbench_run() {
	local name=$1 script=$2 log="$OUT/pgbench_$1"
	rm -f "$log".*
	say "pgbench $name: -c $CLIENTS -T $SECONDS_RUN ($(load))"
	pgbench -n -M prepared -c "$CLIENTS" -j 2 -T "$SECONDS_RUN" -D tenant=ten_pgbench \
		-f "$script" --log --log-prefix="$log" "$DBNAME" >"$OUT/pgbench_$name.out" 2>&1 ||
		{ cat "$OUT/pgbench_$name.out" >&2; exit 1; }
	grep -E 'tps|latency|processed|failed' "$OUT/pgbench_$name.out" >&2
	local tps avg p99
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' "$OUT/pgbench_$name.out")
	avg=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$OUT/pgbench_$name.out")
	# per-transaction log: client_id transaction_no time_us script_no epoch us
	p99=$(cat "$log".* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {i=int(NR*0.99+0.999999); if (i<1) i=1; printf "%.2f", a[i]/1000}')
	echo "$tps $avg $p99 $(load | cut -d' ' -f1)"
}

# loadgen_run MODE: prints "rps mean_ms p99_ms load"
loadgen_run() {
	local mode=$1
	say "loadgen $mode: -c $CLIENTS -d ${SECONDS_RUN}s ($(load))"
	bin/loadgen -url "http://$HTTP_ADDR" -api-key "$key" -mode "$mode" -c "$CLIENTS" -d "${SECONDS_RUN}s" \
		-sim-url "http://$SIM_ADDR" -database-url "$DBURL" >"$OUT/loadgen_$mode.out" 2>&1 ||
		{ cat "$OUT/loadgen_$mode.out" >&2; echo "bench: loadgen $mode failed" >&2; exit 1; }
	head -n -1 "$OUT/loadgen_$mode.out" >&2
	tail -1 "$OUT/loadgen_$mode.out" | jq -r '"\(.rps) \(.mean_ms) \(.p99_ms)"' | tr '\n' ' '
	load | cut -d' ' -f1
}

machine >&2
read -r pc_tps pc_avg pc_p99 pc_load < <(pgbench_run create bench/pgbench/create.sql)
read -r lc_rps lc_avg lc_p99 lc_load < <(loadgen_run create)
read -r pr_tps pr_avg pr_p99 pr_load < <(pgbench_run replay bench/pgbench/replay.sql)
read -r lr_rps lr_avg lr_p99 lr_load < <(loadgen_run replay)

if [ -n "${BENCH_VEGETA:-}" ]; then
	# The outside cross-check of the replay: vegeta (from the Go module
	# proxy) with the same key and body, at BENCH_VEGETA requests/s and then
	# as fast as BENCH_CLIENTS workers go (-rate 0: closed loop, as loadgen).
	say "vegeta replay: ${BENCH_VEGETA}/s, then -rate 0 with $CLIENTS workers, ${SECONDS_RUN}s each"
	[ -x bin/vegeta ] || GOBIN="$PWD/bin" go install github.com/tsenart/vegeta/v12@v12.13.0
	body="$OUT/vegeta_body.json"
	printf '{"order_id":"vegeta-replay","amount":500,"currency":"USD","payment_method":"pm_card_visa"}' >"$body"
	(umask 077 && printf 'POST http://%s/v1/payments\nAuthorization: Bearer %s\nIdempotency-Key: vegeta-replay\nContent-Type: application/json\n@%s\n' \
		"$HTTP_ADDR" "$key" "$body" >"$OUT/vegeta_target.txt")
	bin/vegeta attack -targets "$OUT/vegeta_target.txt" -rate 1/s -duration 1s | bin/vegeta report -type text >/dev/null # creates the payment
	bin/vegeta attack -targets "$OUT/vegeta_target.txt" -rate "${BENCH_VEGETA}/s" -duration "${SECONDS_RUN}s" \
		-workers "$CLIENTS" -max-workers "$CLIENTS" >"$OUT/vegeta_rate.bin"
	echo "vegeta at ${BENCH_VEGETA}/s ($(load)):" >&2
	bin/vegeta report -type text <"$OUT/vegeta_rate.bin" >&2
	bin/vegeta attack -targets "$OUT/vegeta_target.txt" -rate 0 -duration "${SECONDS_RUN}s" \
		-workers "$CLIENTS" -max-workers "$CLIENTS" >"$OUT/vegeta_max.bin"
	echo "vegeta -rate 0, $CLIENTS workers ($(load)):" >&2
	bin/vegeta report -type text <"$OUT/vegeta_max.bin" >&2
	rm -f "$OUT/vegeta_target.txt" # holds the key
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "-" }'; }
machine
printf '%-8s | %-37s | %-37s | %s\n' "c=$CLIENTS" "pgbench (same SQL, 1 statement/trip)" "paymentsvc (loadgen)" "service / pgbench"
printf '%-8s | %-37s | %-37s | %s\n' "--------" "-------------------------------------" "-------------------------------------" "-----------------"
printf '%-8s | %8.0f/s  avg %5.2f p99 %6.2f ms | %8.0f/s  avg %5.2f p99 %6.2f ms | throughput %s, p99 %s\n' \
	create "$pc_tps" "$pc_avg" "$pc_p99" "$lc_rps" "$lc_avg" "$lc_p99" "$(ratio "$lc_rps" "$pc_tps")" "$(ratio "$lc_p99" "$pc_p99")"
printf '%-8s | %8.0f/s  avg %5.2f p99 %6.2f ms | %8.0f/s  avg %5.2f p99 %6.2f ms | throughput %s, p99 %s\n' \
	replay "$pr_tps" "$pr_avg" "$pr_p99" "$lr_rps" "$lr_avg" "$lr_p99" "$(ratio "$lr_rps" "$pr_tps")" "$(ratio "$lr_p99" "$pr_p99")"
echo "load average (1 min) at the end of each run: pgbench create $pc_load, loadgen create $lc_load, pgbench replay $pr_load, loadgen replay $lr_load"
# The pod's peak resident memory over the whole run (the kernel's high-water mark).
echo "paymentsvc peak RSS: $(awk '/^VmHWM/ {printf "%.1f MiB", $2 / 1024}' "/proc/$svc/status")"
if [ "${BENCH_KEEP:-0}" = 1 ]; then
	echo "BENCH_KEEP=1: still running: pids ${pids[*]} (in $OUT/pids); service http://$HTTP_ADDR, simulator http://$SIM_ADDR"
	echo "${pids[*]}" >"$OUT/pids"
	(umask 077 && printf '%s' "$key" >"$OUT/api_key")
fi
