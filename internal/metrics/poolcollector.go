package metrics

import "github.com/prometheus/client_golang/prometheus"

// PoolStat is the database pool's connections at one moment.
type PoolStat struct {
	Total, Idle, Acquired, Constructing int32
	Max                                 int32
}

var poolConnectionsDesc = prometheus.NewDesc("paymentsvc_database_connections",
	"Connections of the process's database pool by state: total (open or opening), idle, acquired, constructing; max is the pool's size.",
	[]string{"state"}, nil)

// poolCollector reports a pool's connections at scrape time.
type poolCollector struct{ stat func() PoolStat }

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- poolConnectionsDesc }

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	for state, n := range map[string]int32{
		"total": s.Total, "idle": s.Idle, "acquired": s.Acquired, "constructing": s.Constructing, "max": s.Max,
	} {
		ch <- prometheus.MustNewConstMetric(poolConnectionsDesc, prometheus.GaugeValue, float64(n), state)
	}
}

// poolReg is the registered pool collector.
var poolReg replaceable

// RegisterPool reports the pool's connections as stat reads them (no
// database round trip), replacing a pool registered before; it returns the
// function that unregisters it.
func RegisterPool(stat func() PoolStat) (unregister func()) {
	return poolReg.register(&poolCollector{stat: stat}) // a pointer: register compares collectors
}
