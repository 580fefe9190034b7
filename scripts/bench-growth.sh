#!/usr/bin/env bash
# make bench-growth: make bench's service figures with 5 million keys and
# payments in the tables, and create's p99 while reconciler gc deletes 1
# million expired keys, against the same without gc. Takes many minutes;
# not part of CI. See docs/BENCHMARKS.md.
#
# Environment: as scripts/bench.sh (whose private cluster it keeps and then
# stops), plus BENCH_GROWTH_ROWS (5000000) and
# BENCH_GROWTH_EXPIRED (1000000).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS="${BENCH_GROWTH_ROWS:-5000000}"
EXPIRED="${BENCH_GROWTH_EXPIRED:-1000000}"
CLIENTS="${BENCH_CLIENTS:-16}"
SECONDS_RUN="${BENCH_SECONDS:-15}"
DBNAME=paymentsvc_bench
PGBIN="${BENCH_PG_BIN:-/usr/lib/postgresql/15/bin}"
OUT="${BENCH_OUT:-bin/bench}"
export BENCH_OUT="$OUT"

say() { printf '\n== %s\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# The empty-table figures, with the stack left running.
say "make bench on empty tables (stack kept)"
BENCH_KEEP=1 ./scripts/bench.sh
read -r -a pids <"$OUT/pids"
# bench.sh's private cluster: PGHOST, PGPORT, PGDATA, PGTMP, HTTP_ADDR, SIM_ADDR, DBURL
set -a
# shellcheck disable=SC1091
. "$OUT/env"
set +a
export PGUSER=postgres
psql() { "$PGBIN/psql" "$@"; }
asdb=()
[ "$(id -u)" = 0 ] && asdb=(runuser -u postgres --)
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	"${asdb[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$PGTMP"
}
trap cleanup EXIT
key=$(cat "$OUT/api_key")
tenant=$(psql -XAt -d "$DBNAME" -c "SELECT id FROM tenants WHERE name = 'bench' ORDER BY created_at DESC LIMIT 1")

say "bulk load: $ROWS payments, keys and audit rows for $tenant ($(load))"
t0=$(date +%s)
psql -X -q -d "$DBNAME" -v tenant="$tenant" -v rows="$ROWS" -f bench/pgbench/growth.sql
echo "loaded in $(($(date +%s) - t0)) s; sizes:" >&2
psql -XAt -d "$DBNAME" -c "SELECT relname, n_live_tup, pg_size_pretty(pg_total_relation_size(relid)) FROM pg_stat_user_tables WHERE relname IN ('payment_attempts','idempotency_keys','payment_attempt_events') ORDER BY 1" >&2

# loadgen_run MODE LABEL: the summary JSON line
loadgen_run() {
	say "loadgen $1 ($2): -c $CLIENTS -d ${SECONDS_RUN}s ($(load))"
	bin/loadgen -url "http://$HTTP_ADDR" -api-key "$key" -mode "$1" -c "$CLIENTS" -d "${SECONDS_RUN}s" \
		-sim-url "http://$SIM_ADDR" -database-url "$DBURL" >"$OUT/growth_$1_$2.out" 2>&1 ||
		{ cat "$OUT/growth_$1_$2.out" >&2; echo "bench-growth: loadgen $1 failed" >&2; exit 1; }
	head -n -1 "$OUT/growth_$1_$2.out" >&2
	tail -1 "$OUT/growth_$1_$2.out"
}
row() { jq -r --arg l "$1" --arg load "$(load | cut -d' ' -f1)" '"\($l) | \(.mode) | \(.rps | floor)/s | p50 \(.p50_ms) | p99 \(.p99_ms) | max \(.max_ms) ms | load \($load)"'; }

results=()
results+=("$(loadgen_run create loaded | row "$ROWS rows")")
results+=("$(loadgen_run replay loaded | row "$ROWS rows")")

say "expiring $EXPIRED keys ($(load))"
psql -X -q -d "$DBNAME" -c "UPDATE idempotency_keys SET expires_at = now() - interval '1 hour' WHERE tenant_id = '$tenant' AND key IN (SELECT 'key-g' || i FROM generate_series(1, $EXPIRED) AS i)" -c "VACUUM ANALYZE idempotency_keys"
results+=("$(loadgen_run create nogc | row "expired, no gc")")

say "reconciler gc while loadgen create runs"
gclog="$OUT/growth_gc.out"
(
	start=$(date +%s.%N)
	DATABASE_URL="$DBURL" PROVIDER_URL="http://$SIM_ADDR" bin/reconciler gc >"$gclog" 2>"$OUT/growth_gc.log"
	echo "gc exit $? in $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}') s" >>"$gclog"
) &
gc=$!
results+=("$(loadgen_run create gc | row "during gc")")
say "waiting for gc"
wait "$gc" || true
cat "$gclog" >&2

echo
echo "growth at c=$CLIENTS, ${SECONDS_RUN}s each (see make bench above for the empty tables):"
printf '%s\n' "${results[@]}"
echo "gc: $(tr '\n' ' ' <"$gclog")"
