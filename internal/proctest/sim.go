package proctest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/acme/paymentsvc/internal/providersim"
)

// Sim is a running providersim with its control API.
type Sim struct {
	*Process
}

// SetFaults replaces the simulator's fault set.
func (s *Sim) SetFaults(t testing.TB, f providersim.Faults) {
	t.Helper()
	body, _ := json.Marshal(f)
	s.control(t, http.MethodPut, "/_sim/faults", body, nil)
}

// ClearFaults removes every fault.
func (s *Sim) ClearFaults(t testing.TB) {
	t.Helper()
	s.control(t, http.MethodDelete, "/_sim/faults", nil, nil)
}

// Charges lists every charge the simulator holds.
func (s *Sim) Charges(t testing.TB) []providersim.Charge {
	t.Helper()
	var out struct {
		Data []providersim.Charge `json:"data"`
	}
	s.control(t, http.MethodGet, "/_sim/charges", nil, &out)
	return out.Data
}

// Stats returns the simulator's counters.
func (s *Sim) Stats(t testing.TB) providersim.Stats {
	t.Helper()
	var st providersim.Stats
	s.control(t, http.MethodGet, "/_sim/stats", nil, &st)
	return st
}

// SucceededChargesFor counts the simulator's succeeded charges whose reference is paymentID.
func (s *Sim) SucceededChargesFor(t testing.TB, paymentID string) int {
	n := 0
	for _, c := range s.Charges(t) {
		if c.Reference == paymentID && c.Status == providersim.StatusSucceeded {
			n++
		}
	}
	return n
}

func (s *Sim) control(t testing.TB, method, path string, body []byte, out any) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("sim %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("sim %s %s: status %d", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("sim %s %s: decode: %v", method, path, err)
		}
	}
}
