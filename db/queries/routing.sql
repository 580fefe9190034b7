-- name: RoutingRulesGet :one
SELECT rules FROM routing_rules WHERE tenant_id = $1;

-- name: RoutingRulesPut :exec
INSERT INTO routing_rules (tenant_id, rules) VALUES ($1, $2)
ON CONFLICT (tenant_id) DO UPDATE SET rules = EXCLUDED.rules, updated_at = now();

-- name: RoutingRulesDelete :exec
DELETE FROM routing_rules WHERE tenant_id = $1;
