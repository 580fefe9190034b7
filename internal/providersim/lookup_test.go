package providersim

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLookupByIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	created := decode[Charge](t, b.charge("k-lookup", 500, "pm_card_visa"))

	found := b.do(http.MethodGet, "/v1/charges?idempotency_key=k-lookup", "", nil)
	require.Equal(t, http.StatusOK, found.status, "found status")
	require.Equal(t, created, decode[Charge](t, found), "found charge")

	missing := b.do(http.MethodGet, "/v1/charges?idempotency_key=k-nobody", "", nil)
	require.Equal(t, http.StatusNotFound, missing.status, "missing status")
	require.Equal(t, "resource_missing", errorCode(t, missing), "missing code")

	byID := b.do(http.MethodGet, "/v1/charges/"+created.ID, "", nil)
	require.Equal(t, http.StatusOK, byID.status, "by id status")
	require.Equal(t, created, decode[Charge](t, byID), "by id charge")
	require.Equal(t, http.StatusNotFound, b.do(http.MethodGet, "/v1/charges/ch_nope", "", nil).status, "unknown id status")
	require.EqualValues(t, 1, b.stats().ChargeCalls, "lookups are not charge calls")
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
		require.Equal(t, http.StatusOK, r.status, query+" status")
		return decode[struct{ Data []Charge }](t, r).Data
	}

	got := list(fmt.Sprintf("created_gte=%d&created_lt=%d", from, to))
	require.EqualValues(t, 2, len(got), "charges in window")
	require.ElementsMatch(t, []string{first.ID, second.ID}, []string{got[0].ID, got[1].ID}, "charges in the window")
	require.True(t, got[0].Created < got[1].Created || (got[0].Created == got[1].Created && got[0].ID < got[1].ID),
		"not ordered by created then id: %v", got)
	require.EqualValues(t, 0, len(list(fmt.Sprintf("created_gte=%d&created_lt=%d", to, to+3600))), "charges in a later window")
	require.EqualValues(t, 0, len(list(fmt.Sprintf("created_gte=%d&created_lt=%d", from-3600, from))), "charges in an earlier window")

	for _, bad := range []string{"created_gte=yesterday", "created_lt=1.5", fmt.Sprintf("created_gte=%d&created_lt=%d", to, from)} {
		r := b.do(http.MethodGet, "/v1/charges?"+bad, "", nil)
		require.Equal(t, http.StatusBadRequest, r.status, bad+" status")
		require.Equal(t, "invalid_request", errorCode(t, r), bad+" code")
	}
}
