#!/usr/bin/env bash
# make run: providersim and paymentsvc on the local PostgreSQL, with a dev
# tenant and a curl command that works as printed. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/payments?sslmode=disable}"
export HTTP_ADDR="${HTTP_ADDR:-127.0.0.1:8080}"
export PROVIDER_URL="${PROVIDER_URL:-http://127.0.0.1:9300}"
export SIM_ADDR="${SIM_ADDR:-${PROVIDER_URL#http://}}"
export SIM_WEBHOOK_URL="${SIM_WEBHOOK_URL:-http://${HTTP_ADDR}/v1/webhooks/sim}"
export SIM_STATE_FILE="${SIM_STATE_FILE:-$PWD/bin/providersim-state.json}"

bin/providersim 2>bin/providersim.log &
sim=$!
trap 'kill $sim 2>/dev/null || true' EXIT

bin/paymentsvc migrate 2>bin/migrate.log || { cat bin/migrate.log >&2; exit 1; }
tenant=$(bin/paymentsvc tenant create --name dev 2>>bin/migrate.log)
key=$(printf '%s' "$tenant" | sed -n 's/.*"api_key":"\([^"]*\)".*/\1/p')

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
Ctrl-C stops both.

MSG
bin/paymentsvc serve
