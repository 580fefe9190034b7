package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// backlogTimeout bounds the query of one scrape, so that a slow or
// unreachable database costs /metrics at most this long.
const backlogTimeout = time.Second

// unresolvedStatuses are the statuses a payment attempt can be stuck in.
var unresolvedStatuses = []string{"CREATED", "PENDING", "UNKNOWN"}

var (
	backlogUnresolvedDesc = prometheus.NewDesc("paymentsvc_attempts_unresolved",
		"Payment attempts not yet final (CREATED, PENDING, UNKNOWN), from the database at scrape time.",
		[]string{"status"}, nil)
	backlogOldestDesc = prometheus.NewDesc("paymentsvc_attempts_oldest_unresolved_age_seconds",
		"Age (since creation) of the oldest payment attempt in each unresolved status; 0 when there is none.",
		[]string{"status"}, nil)
	backlogNeedsReviewDesc = prometheus.NewDesc("paymentsvc_attempts_needs_review",
		"Unresolved payment attempts the reconciler flagged for a human (its check schedule is spent).",
		nil, nil)
	backlogUpDesc = prometheus.NewDesc("paymentsvc_attempts_backlog_up",
		"1 if the backlog gauges were read from the database at this scrape, 0 if the query failed (the gauges are then absent).",
		nil, nil)
)

// Backlog is the unresolved payment attempts in one status, as the collector
// reads them.
type Backlog struct {
	Status        string
	Unresolved    int64
	NeedsReview   int64
	OldestSeconds float64
}

// ReadBacklog reads the unresolved attempts per status (statuses without
// any may be absent); internal/attempts provides it.
type ReadBacklog func(ctx context.Context) ([]Backlog, error)

// BacklogCollector reports the unresolved payment attempts by querying the
// database when /metrics is scraped. The values describe the table, not the
// pod, so every pod reports the same numbers: aggregate them with max, not
// sum. Counting at scrape time (rather than keeping gauges up to date) means
// the numbers are right whichever process (API, webhook, reconciler) moved
// an attempt.
type BacklogCollector struct {
	read ReadBacklog
	log  *slog.Logger
	// mu lets one scrape at a time query, so that scrapes, however many,
	// hold at most one database connection (each for at most backlogTimeout).
	mu sync.Mutex
}

// NewBacklogCollector returns a collector that reads the backlog with read.
func NewBacklogCollector(read ReadBacklog, log *slog.Logger) *BacklogCollector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &BacklogCollector{read: read, log: log}
}

// Describe implements prometheus.Collector.
func (c *BacklogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogUnresolvedDesc
	ch <- backlogOldestDesc
	ch <- backlogNeedsReviewDesc
	ch <- backlogUpDesc
}

// Collect implements prometheus.Collector. A failed query reports up 0 and
// no gauges instead of failing the scrape: the rest of /metrics matters
// most exactly when the database is in trouble.
func (c *BacklogCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	rows, err := c.read(ctx)
	if err != nil {
		c.log.Warn("metrics: attempt backlog query failed", "err", err)
		ch <- prometheus.MustNewConstMetric(backlogUpDesc, prometheus.GaugeValue, 0)
		return
	}
	byStatus := make(map[string]Backlog, len(rows))
	var needsReview int64
	for _, r := range rows {
		byStatus[r.Status] = r
		needsReview += r.NeedsReview
	}
	for _, s := range unresolvedStatuses {
		r := byStatus[s] // zero when none: report 0, so alerts see the series
		ch <- prometheus.MustNewConstMetric(backlogUnresolvedDesc, prometheus.GaugeValue, float64(r.Unresolved), s)
		ch <- prometheus.MustNewConstMetric(backlogOldestDesc, prometheus.GaugeValue, r.OldestSeconds, s)
	}
	ch <- prometheus.MustNewConstMetric(backlogNeedsReviewDesc, prometheus.GaugeValue, float64(needsReview))
	ch <- prometheus.MustNewConstMetric(backlogUpDesc, prometheus.GaugeValue, 1)
}

// backlogReg is the registered BacklogCollector.
var backlogReg replaceable

// RegisterBacklog registers a BacklogCollector reading with read in Registry,
// replacing one registered before (a process that serves twice, as tests
// do), and returns a function that unregisters it.
func RegisterBacklog(read ReadBacklog, log *slog.Logger) (unregister func()) {
	return backlogReg.register(NewBacklogCollector(read, log))
}

// replaceable is a collector slot of Registry that a new registration
// takes over: a process that serves twice (as tests do) reports the
// current service's values.
type replaceable struct {
	mu sync.Mutex
	c  prometheus.Collector
}

// register puts c in the slot, unregistering the one before, and returns
// the function that unregisters c (and does nothing once c was replaced).
func (r *replaceable) register(c prometheus.Collector) (unregister func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		Registry.Unregister(r.c)
	}
	Registry.MustRegister(c)
	r.c = c
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.c == c {
			Registry.Unregister(c)
			r.c = nil
		}
	}
}
