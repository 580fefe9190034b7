package providersim

import (
	"cmp"
	"encoding/json"
	"slices"
)

// storedAnswer is the first answer given under an idempotency key; later calls
// with the same key and parameters get exactly these bytes back.
type storedAnswer struct {
	ID     string          `json:"id"` // the charge or refund the key created
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
	// Request is the refund, capture or void request that was answered,
	// which a later call under the key must repeat. Charges leave it nil:
	// their request is read back from the charge itself.
	Request *opRequest `json:"request,omitempty"`
}

// state is everything the simulator remembers; Server.mu guards it.
type state struct {
	charges    map[string]*Charge
	refunds    map[string]*Refund
	chargeKeys map[string]*storedAnswer
	refundKeys map[string]*storedAnswer
	// captures and voids are kept by the key that made them, with the
	// answer given under it.
	captures    map[string]*Capture
	voids       map[string]*Capture
	captureKeys map[string]*storedAnswer
	voidKeys    map[string]*storedAnswer
	// held is the authorized charges, which expire when their
	// capture_before passes.
	held map[string]*Charge
	// stripeKeys are the Stripe face's idempotency keys.
	stripeKeys map[string]*stripeKey
}

func newState() *state {
	return &state{
		charges:     map[string]*Charge{},
		refunds:     map[string]*Refund{},
		chargeKeys:  map[string]*storedAnswer{},
		refundKeys:  map[string]*storedAnswer{},
		captures:    map[string]*Capture{},
		voids:       map[string]*Capture{},
		captureKeys: map[string]*storedAnswer{},
		voidKeys:    map[string]*storedAnswer{},
		held:        map[string]*Charge{},
		stripeKeys:  map[string]*stripeKey{},
	}
}

// addCharge records ch (held while it is authorized).
func (st *state) addCharge(ch *Charge) {
	st.charges[ch.ID] = ch
	if ch.Status == StatusAuthorized {
		st.held[ch.ID] = ch
	}
}

// removeCharge forgets charge id.
func (st *state) removeCharge(id string) {
	delete(st.charges, id)
	delete(st.held, id)
}

// chargeByKey returns the charge created under an idempotency key.
func (st *state) chargeByKey(key string) (*Charge, *storedAnswer, bool) {
	return byKey(st.chargeKeys, st.charges, key)
}

// refundByKey returns the refund created under an idempotency key.
func (st *state) refundByKey(key string) (*Refund, *storedAnswer, bool) {
	return byKey(st.refundKeys, st.refunds, key)
}

// byKey returns the object of objs that the answer stored under key names.
func byKey[T any](keys map[string]*storedAnswer, objs map[string]*T, key string) (*T, *storedAnswer, bool) {
	ans, ok := keys[key]
	if !ok {
		return nil, nil, false
	}
	return objs[ans.ID], ans, true
}

// sortedCharges returns copies of the charges keep accepts, ordered by
// created then id: all of them, or the first limit when limit > 0.
func (st *state) sortedCharges(keep func(*Charge) bool, limit int) []Charge {
	kept := make([]*Charge, 0, len(st.charges))
	for _, ch := range st.charges {
		if keep == nil || keep(ch) {
			kept = append(kept, ch)
		}
	}
	slices.SortFunc(kept, func(a, b *Charge) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), cmp.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(kept) > limit {
		kept = kept[:limit]
	}
	out := make([]Charge, len(kept))
	for i, ch := range kept {
		out[i] = *ch
	}
	return out
}

// sortedRefunds returns copies of the refunds keep accepts (all of them when
// keep is nil), ordered by created then id.
func (st *state) sortedRefunds(keep func(*Refund) bool) []Refund {
	out := make([]Refund, 0, len(st.refunds))
	for _, re := range st.refunds {
		if keep == nil || keep(re) {
			out = append(out, *re)
		}
	}
	slices.SortFunc(out, func(a, b Refund) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), cmp.Compare(a.ID, b.ID))
	})
	return out
}
