#!/usr/bin/env bash
# make run: providersim and paymentsvc on the local PostgreSQL, with a dev
# tenant, a curl command that works as printed, and the operator console
# with a first operator. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/payments?sslmode=disable}"
export HTTP_ADDR="${HTTP_ADDR:-127.0.0.1:8080}"
export PROVIDER_URL="${PROVIDER_URL:-http://127.0.0.1:9300}"
export SIM_ADDR="${SIM_ADDR:-${PROVIDER_URL#http://}}"
export SIM_WEBHOOK_URL="${SIM_WEBHOOK_URL:-http://${HTTP_ADDR}/v1/webhooks/sim}"
export SIM_STATE_FILE="${SIM_STATE_FILE:-$PWD/bin/providersim-state.json}"
export CONSOLE_ADDR="${CONSOLE_ADDR:-127.0.0.1:8081}"

bin/providersim 2>bin/providersim.log &
sim=$!
trap 'kill $sim 2>/dev/null || true' EXIT

bin/paymentsvc migrate 2>bin/migrate.log || { cat bin/migrate.log >&2; exit 1; }
tenant=$(bin/paymentsvc tenant create --name dev 2>>bin/migrate.log)
key=$(printf '%s' "$tenant" | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')

# The console's first operator, admin@localhost. Its password is shown once
# by operator create, so make run keeps it in bin/console-operator.json
# (mode 600) and prints it again on the next run. If the database has the
# operator but the file is gone (bin/ cleaned), a new admin-<time>@localhost
# is made instead.
opfile=bin/console-operator.json
if out=$(bin/paymentsvc operator create --email admin@localhost --role admin 2>>bin/migrate.log); then
  (umask 077; printf '%s\n' "$out" >"$opfile")
elif [ ! -s "$opfile" ]; then
  out=$(bin/paymentsvc operator create --email "admin-$(date +%s)@localhost" --role admin 2>>bin/migrate.log) \
    || { cat bin/migrate.log >&2; exit 1; }
  (umask 077; printf '%s\n' "$out" >"$opfile")
fi
op_email=$(sed -n 's/.*"email":"\([^"]*\)".*/\1/p' "$opfile")
op_password=$(sed -n 's/.*"password":"\([^"]*\)".*/\1/p' "$opfile")

cat <<MSG

paymentsvc on http://${HTTP_ADDR}  (provider simulator on ${PROVIDER_URL}, logs in bin/providersim.log)
dev tenant: ${tenant}

Try it (run it twice: the second answer is replayed, and nothing is charged twice):

  curl -si -X POST http://${HTTP_ADDR}/v1/payments \\
    -H 'Authorization: Bearer ${key}' \\
    -H 'Idempotency-Key: demo-order-1' \\
    -H 'Content-Type: application/json' \\
    -d '{"order_id":"order-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}'

Or with paymentsctl (one idempotency key, retried until the payment is final):

  PAYMENTS_URL=http://${HTTP_ADDR} PAYMENTS_API_KEY=${key} \\
    bin/paymentsctl pay --order-id order-2 --amount 500 --currency USD --payment-method pm_card_visa

Provider's view: curl -s ${PROVIDER_URL}/_sim/charges

Operator console: http://${CONSOLE_ADDR}/console/
  sign in as ${op_email} with password ${op_password}
  (kept in ${opfile}; more operators: bin/paymentsvc operator create --email E --role viewer|operator|admin)
Ctrl-C stops both.

MSG
bin/paymentsvc serve
