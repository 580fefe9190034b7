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
