package main

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/acme/paymentsvc/internal/providersim"
)

// statusError is the key under which requests that got no HTTP answer
// (connection refused, timeout) are counted.
const statusError = "error"

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. Zero for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	rank := int(p/100*float64(len(sorted)) + 0.999999999)
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// counts is the number of answers per HTTP status ("error": no answer).
type counts map[string]int64

func (c counts) add(status int, err error) {
	if err != nil {
		c[statusError]++
		return
	}
	c[strconv.Itoa(status)]++
}

func (c counts) merge(o counts) {
	for k, v := range o {
		c[k] += v
	}
}

// total is the number of requests counted.
func (c counts) total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// keys returns the statuses in order (numbers first, "error" last).
func (c counts) keys() []string {
	ks := make([]string, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// summary is what one run measured; its JSON is the final line of output.
type summary struct {
	Mode        string           `json:"mode"`
	Concurrency int              `json:"concurrency"`
	Requests    int64            `json:"requests"`
	Seconds     float64          `json:"seconds"`
	RPS         float64          `json:"rps"`
	P50ms       float64          `json:"p50_ms"`
	P95ms       float64          `json:"p95_ms"`
	P99ms       float64          `json:"p99_ms"`
	MaxMs       float64          `json:"max_ms"`
	MeanMs      float64          `json:"mean_ms"`
	Status      map[string]int64 `json:"status"`
	Replayed    int64            `json:"replayed"`
	Payments    int              `json:"payments"`
	Money       *moneyResult     `json:"money,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// summarize sorts lat in place and computes the figures of a run.
func summarize(mode string, c int, lat []time.Duration, st counts, elapsed time.Duration) summary {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	s := summary{Mode: mode, Concurrency: c, Requests: st.total(), Seconds: elapsed.Seconds(), Status: map[string]int64(st)}
	if elapsed > 0 {
		s.RPS = float64(s.Requests) / elapsed.Seconds()
	}
	if len(lat) > 0 {
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		s.MeanMs = ms(sum / time.Duration(len(lat)))
		s.P50ms = ms(percentile(lat, 50))
		s.P95ms = ms(percentile(lat, 95))
		s.P99ms = ms(percentile(lat, 99))
		s.MaxMs = ms(lat[len(lat)-1])
	}
	return s
}

// moneyResult is the outcome of the money check.
type moneyResult struct {
	Payments          int      `json:"payments"`           // payments the run created
	SucceededPayments int      `json:"succeeded_payments"` // of them, SUCCEEDED in the service
	SucceededCharges  int      `json:"succeeded_charges"`  // succeeded charges at the provider referencing them
	DoubleCharged     []string `json:"double_charged,omitempty"`
	Missing           []string `json:"missing,omitempty"` // payment ids the service did not list
	OK                bool     `json:"ok"`
	Problem           string   `json:"problem,omitempty"`
}

// checkMoney compares the run's payments (id → status as the service
// reports it now; "" when the service did not list it) with the provider's
// charges: every payment has at most one charge (charges are grouped by
// reference, which is the payment id), and the succeeded charges referencing
// the run's payments are exactly as many as its SUCCEEDED payments.
func checkMoney(payments map[string]string, charges []providersim.Charge) moneyResult {
	r := moneyResult{Payments: len(payments)}
	perRef := map[string]int{}
	for _, ch := range charges {
		if _, ours := payments[ch.Reference]; !ours {
			continue
		}
		perRef[ch.Reference]++
		if ch.Status == providersim.StatusSucceeded {
			r.SucceededCharges++
		}
	}
	for id, st := range payments {
		if st == "SUCCEEDED" {
			r.SucceededPayments++
		}
		if st == "" {
			r.Missing = append(r.Missing, id)
		}
		if perRef[id] > 1 {
			r.DoubleCharged = append(r.DoubleCharged, id)
		}
	}
	sort.Strings(r.DoubleCharged)
	sort.Strings(r.Missing)
	switch {
	case len(r.DoubleCharged) > 0:
		r.Problem = fmt.Sprintf("DOUBLE CHARGE: %d payment(s) have more than one charge at the provider", len(r.DoubleCharged))
	case r.SucceededCharges != r.SucceededPayments:
		r.Problem = fmt.Sprintf("MISMATCH: %d succeeded charges at the provider, %d SUCCEEDED payments", r.SucceededCharges, r.SucceededPayments)
	case len(r.Missing) > 0:
		r.Problem = fmt.Sprintf("MISSING: %d payment(s) answered 201 but not listed by the service", len(r.Missing))
	}
	r.OK = r.Problem == ""
	return r
}
