package console

import (
	"net/http"
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/outbox"
)

// statuses are the payment statuses the console counts and filters by, in
// the order a payment meets them.
var statuses = []lifecycle.Status{
	lifecycle.Created, lifecycle.Pending, lifecycle.Authorized, lifecycle.Succeeded, lifecycle.Canceled, lifecycle.Failed, lifecycle.Unknown,
}

// overviewWindow is how far back the overview counts payments.
const overviewWindow = 24 * time.Hour

// stuckAfter is how long an unresolved payment must have been still to be
// listed as needing attention, and stuckShown how many are listed.
const (
	stuckAfter = time.Minute
	stuckShown = 20
)

type statusCount struct {
	Status lifecycle.Status
	N      int64
}

type overviewData struct {
	Counts            []statusCount
	Chart             chart
	Anomalies         int64
	Review            int64
	Outbox            int
	DeliveriesFailing int64
	Stuck             []attempts.Attempt
}

// overview is /console/: the last 24 h per status and hour, and what needs
// a human (stuck payments, anomalies, review, backlogs).
func (s *server) overview(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/console/" {
		s.fail(w, r, http.StatusNotFound, "No such page.")
		return
	}
	ctx := r.Context()
	var d overviewData
	counts, err := attempts.CountCreatedSince(ctx, s.Pool, overviewWindow)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	for _, st := range statuses {
		d.Counts = append(d.Counts, statusCount{Status: st, N: counts[st]})
	}
	hourly, err := attempts.HourlyCreatedSince(ctx, s.Pool, overviewWindow)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	d.Chart = hourlyChart(hourly, time.Now())
	if d.Anomalies, err = attempts.CountOpenAnomalies(ctx, s.Pool); err == nil {
		if d.Review, err = attempts.NeedsReview(ctx, s.Pool); err == nil {
			if d.Outbox, _, err = outbox.Stats(ctx, s.Pool); err == nil {
				if d.DeliveriesFailing, err = delivery.CountFailing(ctx, s.Pool); err == nil {
					d.Stuck, err = attempts.Stuck(ctx, s.Pool, stuckAfter, stuckShown)
				}
			}
		}
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Data: d})
}
