package main

import (
	"errors"
	"testing"
	"time"

	"github.com/acme/paymentsvc/internal/providersim"
)

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {95, 95 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}, {0.1, time.Millisecond}} {
		if got := percentile(lat, c.p); got != c.want {
			t.Errorf("percentile(1..100ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("percentile(nil) = %v", got)
	}
	if got := percentile([]time.Duration{7}, 50); got != 7 {
		t.Errorf("percentile(one) = %v", got)
	}
}

func TestSummarize(t *testing.T) {
	st := counts{}
	st.add(201, nil)
	st.add(201, nil)
	st.add(409, nil)
	st.add(0, errors.New("refused"))
	s := summarize("storm", 4, []time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}, st, 2*time.Second)
	if s.Requests != 4 || s.RPS != 2 || s.Status["201"] != 2 || s.Status["409"] != 1 || s.Status[statusError] != 1 {
		t.Fatalf("summary %+v", s)
	}
	if s.P50ms != 2 || s.MaxMs != 4 || s.MeanMs != 2.5 {
		t.Fatalf("latencies %+v", s)
	}
	if got := st.keys(); len(got) != 3 || got[0] != "201" || got[2] != statusError {
		t.Fatalf("keys %v", got)
	}
}

func TestSlot(t *testing.T) {
	if slot("create", 16, 41) != 41 || slot("replay", 16, 41) != 0 {
		t.Fatal("create or replay slot")
	}
	// storm, c=16: 4 keys, each used stormRounds times before the next set.
	seen := map[int64]int{}
	for i := int64(0); i < 4*stormRounds; i++ {
		seen[slot("storm", 16, i)]++
	}
	if len(seen) != 4 || seen[0] != stormRounds || seen[3] != stormRounds {
		t.Fatalf("first set %v", seen)
	}
	if slot("storm", 16, 4*stormRounds) != 4 || slot("storm", 1, 5) != 0 {
		t.Fatal("next set")
	}
}

func TestCheckMoney(t *testing.T) {
	ch := func(ref, status string) providersim.Charge {
		return providersim.Charge{Reference: ref, Status: status, Amount: 500}
	}
	ok := checkMoney(map[string]string{"pay_1": "SUCCEEDED", "pay_2": "SUCCEEDED", "pay_3": "FAILED"},
		[]providersim.Charge{ch("pay_1", "succeeded"), ch("pay_2", "succeeded"), ch("pay_3", "failed"), ch("other", "succeeded")})
	if !ok.OK || ok.SucceededCharges != 2 || ok.SucceededPayments != 2 || ok.Payments != 3 {
		t.Fatalf("clean run: %+v", ok)
	}
	double := checkMoney(map[string]string{"pay_1": "SUCCEEDED"},
		[]providersim.Charge{ch("pay_1", "succeeded"), ch("pay_1", "succeeded")})
	if double.OK || len(double.DoubleCharged) != 1 || double.DoubleCharged[0] != "pay_1" {
		t.Fatalf("double charge: %+v", double)
	}
	mismatch := checkMoney(map[string]string{"pay_1": "SUCCEEDED", "pay_2": "SUCCEEDED"},
		[]providersim.Charge{ch("pay_1", "succeeded")})
	if mismatch.OK || mismatch.Problem == "" {
		t.Fatalf("mismatch: %+v", mismatch)
	}
	missing := checkMoney(map[string]string{"pay_1": ""}, nil)
	if missing.OK || len(missing.Missing) != 1 {
		t.Fatalf("missing: %+v", missing)
	}
}
