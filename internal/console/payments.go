package console

import (
	"errors"
	"net/http"
	"net/url"
	"slices"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/tenants"
)

// pageSize is how many payments a page of the list shows.
const pageSize = 50

// listFilter is the list's query: status, tenant id and q (a payment id,
// order id or provider charge id, exactly).
type listFilter struct {
	Status string
	Tenant string
	Q      string
}

type paymentsData struct {
	Filter   listFilter
	Statuses []lifecycle.Status
	Tenants  []tenants.Listed
	Rows     []attempts.Attempt
	Next     string // the next page's URL, "" on the last page
}

// paymentList is /console/payments?status=S&tenant=T&q=TEXT&before=CURSOR:
// newest first, pageSize a page; the cursor is the last payment id shown.
func (s *server) paymentList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	qs := r.URL.Query()
	f := listFilter{Status: qs.Get("status"), Tenant: qs.Get("tenant"), Q: qs.Get("q")}
	d := paymentsData{Filter: f, Statuses: statuses}
	v := view{Title: "Payments", Nav: "payments", Data: &d}
	var err error
	if d.Tenants, err = tenants.List(ctx, s.Pool); err != nil {
		s.internal(w, r, err)
		return
	}
	if f.Status != "" && !slices.Contains(statuses, lifecycle.Status(f.Status)) {
		v.Flash = &flash{Text: "There is no status " + f.Status + "."}
		s.render(w, r, http.StatusBadRequest, "payments", v)
		return
	}
	search := attempts.Search{Status: lifecycle.Status(f.Status), TenantID: f.Tenant, Q: f.Q, Limit: pageSize}
	if before := qs.Get("before"); before != "" {
		p, err := attempts.Get(ctx, s.Pool, before)
		if errors.Is(err, attempts.ErrNotFound) {
			v.Flash = &flash{Text: "The page cursor names no payment; start again from the first page."}
			s.render(w, r, http.StatusBadRequest, "payments", v)
			return
		} else if err != nil {
			s.internal(w, r, err)
			return
		}
		search.Before = &p
	}
	rows, more, err := attempts.Find(ctx, s.Pool, search)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	d.Rows = rows
	if more {
		next := url.Values{"before": {rows[len(rows)-1].ID}}
		for k, val := range map[string]string{"status": f.Status, "tenant": f.Tenant, "q": f.Q} {
			if val != "" {
				next.Set(k, val)
			}
		}
		d.Next = "/console/payments?" + next.Encode()
	}
	s.render(w, r, http.StatusOK, "payments", v)
}
