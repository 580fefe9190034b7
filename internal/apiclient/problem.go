package apiclient

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/acme/paymentsvc/internal/apperr"
)

// ProblemTypeBase is what every problem's type starts with; the code follows.
const ProblemTypeBase = "https://paymentsvc.example/problems/"

// CheckProblem reports, as an error naming the first difference, whether r
// is not an RFC 9457 problem with the HTTP status and code: the content
// type, every field (type and title derived from the code and status, a
// detail), and no Idempotent-Replayed, since refusals are never stored.
func (r Response) CheckProblem(status int, code string) error {
	if r.Status != status {
		return fmt.Errorf("status %d, want %d: %s", r.Status, status, r)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Errorf("content type %q, want application/problem+json: %s", ct, r)
	}
	var p apperr.Problem
	if err := json.Unmarshal(r.Raw, &p); err != nil {
		return fmt.Errorf("not a problem document (%v): %s", err, r)
	}
	want := apperr.Problem{
		Type: ProblemTypeBase + code, Title: http.StatusText(status), Status: status, Code: code,
		Detail: p.Detail, PaymentID: p.PaymentID,
	}
	if p != want {
		return fmt.Errorf("problem %+v, want %+v", p, want)
	}
	if p.Detail == "" {
		return fmt.Errorf("problem without a detail: %s", r)
	}
	if r.Replayed() {
		return fmt.Errorf("a problem answered as a replay: %s", r)
	}
	return nil
}
