package providersim

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestLookupByIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	created := decode[Charge](t, b.charge("k-lookup", 500, "pm_card_visa"))

	found := b.do(http.MethodGet, "/v1/charges?idempotency_key=k-lookup", "", nil)
	equal(t, found.status, http.StatusOK, "found status")
	equal(t, decode[Charge](t, found), created, "found charge")

	missing := b.do(http.MethodGet, "/v1/charges?idempotency_key=k-nobody", "", nil)
	equal(t, missing.status, http.StatusNotFound, "missing status")
	equal(t, errorCode(t, missing), "resource_missing", "missing code")

	byID := b.do(http.MethodGet, "/v1/charges/"+created.ID, "", nil)
	equal(t, byID.status, http.StatusOK, "by id status")
	equal(t, decode[Charge](t, byID), created, "by id charge")
	equal(t, b.do(http.MethodGet, "/v1/charges/ch_nope", "", nil).status, http.StatusNotFound, "unknown id status")
	equal(t, b.stats().ChargeCalls, 1, "lookups are not charge calls")
}

func TestListChargesByWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	from := time.Now().Unix()
	first := decode[Charge](t, b.charge("k-list-1", 500, "pm_card_visa"))
	second := decode[Charge](t, b.charge("k-list-2", 700, "pm_card_visa"))
	to := time.Now().Unix() + 1

	list := func(query string) []Charge {
		t.Helper()
		r := b.do(http.MethodGet, "/v1/charges?"+query, "", nil)
		equal(t, r.status, http.StatusOK, query+" status")
		return decode[struct{ Data []Charge }](t, r).Data
	}

	got := list(fmt.Sprintf("created_gte=%d&created_lt=%d", from, to))
	equal(t, len(got), 2, "charges in window")
	want := map[string]bool{first.ID: true, second.ID: true}
	if !want[got[0].ID] || !want[got[1].ID] || got[0].ID == got[1].ID {
		t.Fatalf("window holds %v, want %s and %s", got, first.ID, second.ID)
	}
	if got[0].Created > got[1].Created || (got[0].Created == got[1].Created && got[0].ID > got[1].ID) {
		t.Fatalf("not ordered by created then id: %v", got)
	}
	equal(t, len(list(fmt.Sprintf("created_gte=%d&created_lt=%d", to, to+3600))), 0, "charges in a later window")
	equal(t, len(list(fmt.Sprintf("created_gte=%d&created_lt=%d", from-3600, from))), 0, "charges in an earlier window")

	for _, bad := range []string{"created_gte=yesterday", "created_lt=1.5", fmt.Sprintf("created_gte=%d&created_lt=%d", to, from)} {
		r := b.do(http.MethodGet, "/v1/charges?"+bad, "", nil)
		equal(t, r.status, http.StatusBadRequest, bad+" status")
		equal(t, errorCode(t, r), "invalid_request", bad+" code")
	}
}

// TestListChargesPaged: with ?limit the list comes a page at a time, in
// order, each page continuing after ?starting_after, has_more false on the
// last; a bad limit or an unknown cursor is refused. Charges imported with
// POST /_sim/charges are listed and looked up like any other.
func TestListChargesPaged(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	var imported []Charge
	for i := range 25 {
		imported = append(imported, Charge{
			ID: fmt.Sprintf("ch_p%02d", i), Amount: 100, Currency: "USD", Status: StatusSucceeded,
			Reference: fmt.Sprintf("pay_%d", i), IdempotencyKey: fmt.Sprintf("psvc_pay_%d", i),
			Created: 1_700_000_000 + int64(i/3), // three charges a second: order by created, then id
		})
	}
	r := b.do(http.MethodPost, "/_sim/charges", "", map[string]any{"data": imported})
	equal(t, r.status, http.StatusOK, "import status")
	equal(t, decode[struct{ Imported int }](t, r).Imported, 25, "imported")

	var got []Charge
	after, pages := "", 0
	for {
		q := "/v1/charges?created_gte=1700000000&created_lt=1700000100&limit=10"
		if after != "" {
			q += "&starting_after=" + after
		}
		r := b.do(http.MethodGet, q, "", nil)
		equal(t, r.status, http.StatusOK, "page status")
		page := decode[struct {
			Data    []Charge
			HasMore bool `json:"has_more"`
		}](t, r)
		pages++
		got = append(got, page.Data...)
		if !page.HasMore {
			break
		}
		equal(t, len(page.Data), 10, "a page that has more is full")
		after = page.Data[len(page.Data)-1].ID
	}
	equal(t, pages, 3, "pages")
	equal(t, len(got), 25, "charges over the pages")
	for i, c := range got {
		equal(t, c.ID, imported[i].ID, fmt.Sprintf("charge %d in order", i))
	}
	found := b.do(http.MethodGet, "/v1/charges?idempotency_key=psvc_pay_7", "", nil)
	equal(t, found.status, http.StatusOK, "imported charge found by key")
	equal(t, decode[Charge](t, found).ID, "ch_p07", "imported charge by key")

	for _, bad := range []string{"limit=0", "limit=10001", "limit=x", "limit=5&starting_after=ch_nobody"} {
		r := b.do(http.MethodGet, "/v1/charges?created_gte=1700000000&created_lt=1700000100&"+bad, "", nil)
		equal(t, r.status, http.StatusBadRequest, bad+" status")
	}
	dup := b.do(http.MethodPost, "/_sim/charges", "", map[string]any{"data": imported[:1]})
	equal(t, dup.status, http.StatusBadRequest, "importing a taken key")
}
