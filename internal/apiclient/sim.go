package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/acme/paymentsvc/internal/providersim"
)

// simHTTP carries the requests of a Sim without a client of its own.
var simHTTP = NoKeepAlive()

// Sim is a client of the provider simulator's control API (/_sim/…).
type Sim struct {
	URL  string
	HTTP *http.Client // nil: NoKeepAlive()
}

// SetFaults replaces the simulator's fault set.
func (s Sim) SetFaults(ctx context.Context, f providersim.Faults) error {
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return s.call(ctx, http.MethodPut, "/_sim/faults", body, nil)
}

// ClearFaults goes back to the simulator's startup faults.
func (s Sim) ClearFaults(ctx context.Context) error {
	return s.call(ctx, http.MethodDelete, "/_sim/faults", nil, nil)
}

// Charges lists every charge the simulator holds, oldest first.
func (s Sim) Charges(ctx context.Context) ([]providersim.Charge, error) {
	var out struct {
		Data []providersim.Charge `json:"data"`
	}
	err := s.call(ctx, http.MethodGet, "/_sim/charges", nil, &out)
	return out.Data, err
}

// Expire makes the authorization of charge id expire now.
func (s Sim) Expire(ctx context.Context, id string) error {
	return s.call(ctx, http.MethodPost, "/_sim/charges/"+id+"/expire", nil, nil)
}

// Stats returns the simulator's counters.
func (s Sim) Stats(ctx context.Context) (providersim.Stats, error) {
	var st providersim.Stats
	err := s.call(ctx, http.MethodGet, "/_sim/stats", nil, &st)
	return st, err
}

func (s Sim) call(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := s.HTTP
	if client == nil {
		client = simHTTP
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("sim %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("sim %s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("sim %s %s: decode: %w", method, path, err)
	}
	return nil
}
