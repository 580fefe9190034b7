// Package routing owns each tenant's routing rules (table routing_rules)
// and the one pure function that turns them into a payment's route: the
// ordered providers it may go to. Only internal/payments routes payments.
//
// A payment takes the first rule whose currency matches (a rule without
// currency matches all); without rules, or when none matches, the default
// order (PROVIDERS). It goes to the first provider of its route whose
// breaker is not open, and moves on to the next only when the call provably
// never reached the provider (see docs/providers.md). Stored rules are kept
// as stored when PROVIDERS changes; the payments service skips a provider
// of a route that is no longer configured.
package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/acme/paymentsvc/internal/db"
)

// MaxRules bounds a tenant's rules.
const MaxRules = 50

// Rule routes the payments of one currency (or of every currency, when
// Currency is empty) to Providers, in order.
type Rule struct {
	Currency  string   `json:"currency,omitempty"`
	Providers []string `json:"providers"`
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Validate reports why rules cannot be stored: an unknown provider (known
// are the configured ones), an empty or repeating provider list, a bad or
// repeated currency, a rule after one without currency (it could never
// match), or too many rules. Its error text is safe to show a client.
func Validate(rules []Rule, known []string) error {
	if len(rules) > MaxRules {
		return fmt.Errorf("at most %d rules", MaxRules)
	}
	isKnown := map[string]bool{}
	for _, k := range known {
		isKnown[k] = true
	}
	currencies := map[string]bool{}
	for i, r := range rules {
		if i > 0 && rules[i-1].Currency == "" {
			return fmt.Errorf("rules[%d] follows a rule without currency, which matches every payment", i)
		}
		if r.Currency != "" {
			if !currencyRE.MatchString(r.Currency) {
				return fmt.Errorf("rules[%d].currency must be an ISO 4217 code in upper case", i)
			}
			if currencies[r.Currency] {
				return fmt.Errorf("rules[%d].currency %s has a rule already", i, r.Currency)
			}
			currencies[r.Currency] = true
		}
		if len(r.Providers) == 0 {
			return fmt.Errorf("rules[%d].providers must name at least one provider", i)
		}
		seen := map[string]bool{}
		for _, p := range r.Providers {
			if !isKnown[p] {
				return fmt.Errorf("rules[%d].providers: unknown provider %q", i, p)
			}
			if seen[p] {
				return fmt.Errorf("rules[%d].providers names %q twice", i, p)
			}
			seen[p] = true
		}
	}
	return nil
}

// Route is the ordered providers a payment in currency may go to under
// rules, else defaultOrder.
func Route(rules []Rule, currency string, defaultOrder []string) []string {
	for _, r := range rules {
		if r.Currency == "" || r.Currency == currency {
			return r.Providers
		}
	}
	return defaultOrder
}

// Get returns tenantID's rules (none: empty).
func Get(ctx context.Context, q db.DBTX, tenantID string) ([]Rule, error) {
	raw, err := db.Q.RoutingRulesGet(ctx, q, tenantID)
	return decode(tenantID, raw, err)
}

// Queued is rules read in a pipeline, valid once it is sent.
type Queued struct{ Rules []Rule }

// QueueGet queues Get into p, for a transaction of one round trip.
func QueueGet(p *db.Pipeline, tenantID string) *Queued {
	r := &Queued{}
	p.Add(func(ctx context.Context, q db.DBTX) error {
		raw, err := db.Q.RoutingRulesGet(ctx, q, tenantID)
		r.Rules, err = decode(tenantID, raw, err)
		return err
	})
	return r
}

func decode(tenantID string, raw []byte, err error) ([]Rule, error) {
	if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
		return []Rule{}, nil
	} else if err != nil {
		return nil, err
	}
	var rules []Rule
	if err := json.Unmarshal(raw, &rules); err != nil {
		return nil, fmt.Errorf("routing rules of %s: %w", tenantID, err)
	}
	return rules, nil
}

// Put replaces tenantID's rules (validated by the caller); none clears them.
func Put(ctx context.Context, q db.DBTX, tenantID string, rules []Rule) error {
	if len(rules) == 0 {
		return db.Translate(db.Q.RoutingRulesDelete(ctx, q, tenantID))
	}
	raw, err := json.Marshal(rules)
	if err != nil {
		return err
	}
	return db.Translate(db.Q.RoutingRulesPut(ctx, q, db.RoutingRulesPutParams{TenantID: tenantID, Rules: raw}))
}
