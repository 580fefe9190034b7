package api

import (
	"net/http"

	"github.com/acme/paymentsvc/internal/routing"
)

// routingBody is the body of PUT and GET /v1/routing.
type routingBody struct {
	Rules []routing.Rule `json:"rules"`
}

// putRouting is PUT /v1/routing: it replaces the tenant's rules, validated
// against the configured providers (400 and nothing changed otherwise). A
// PUT is idempotent by itself: no Idempotency-Key.
func (s *server) putRouting(w http.ResponseWriter, r *http.Request) {
	raw, err := readJSONBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var body struct {
		Rules *[]ruleRequest `json:"rules"`
	}
	if err := decodeStrict(raw, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	if body.Rules == nil {
		s.writeError(w, r, invalid("rules is required ({\"rules\":[]} clears them)"))
		return
	}
	rules := make([]routing.Rule, len(*body.Rules))
	for i, rule := range *body.Rules {
		if rule.Currency != nil && !isISO4217(*rule.Currency) {
			// The same currencies a payment may have; "" too: only a rule
			// without currency matches every payment.
			s.writeError(w, r, invalid("rules[%d].currency must be an ISO 4217 alphabetic code in upper case, e.g. USD (leave it out for a rule that matches every currency)", i))
			return
		}
		rules[i].Providers = rule.Providers
		if rule.Currency != nil {
			rules[i].Currency = *rule.Currency
		}
	}
	if err := routing.Validate(rules, s.Payments.ProviderNames()); err != nil {
		s.writeError(w, r, invalid("%s", err.Error()))
		return
	}
	t := tenantOf(r.Context())
	if err := routing.Put(r.Context(), s.Pool, t.ID, rules); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeRules(w, rules)
}

// ruleRequest is a rule as PUT: routing.Rule reads a "" currency as none,
// so the request is decoded apart to tell an absent currency (or null)
// from "", which is refused.
type ruleRequest struct {
	Currency  *string  `json:"currency"`
	Providers []string `json:"providers"`
}

// getRouting is GET /v1/routing: the tenant's rules as stored.
func (s *server) getRouting(w http.ResponseWriter, r *http.Request) {
	rules, err := routing.Get(r.Context(), s.Pool, tenantOf(r.Context()).ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeRules(w, rules)
}

func writeRules(w http.ResponseWriter, rules []routing.Rule) {
	if rules == nil {
		rules = []routing.Rule{}
	}
	writeJSON(w, http.StatusOK, routingBody{Rules: rules})
}
