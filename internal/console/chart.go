package console

import (
	"fmt"
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// chart is the overview's bar chart of payments per hour, stacked by
// status, drawn as inline SVG on the server (no script, no library).
type chart struct {
	Width, Height int
	Bars          []bar
	Ticks         []tick
	Legend        []lifecycle.Status
	Max           int64
	Summary       string // the chart in words, for screen readers
}

// bar is one status's part of one hour's bar.
type bar struct {
	X, Y, W, H int
	Status     lifecycle.Status
	Title      string
}

// tick is an hour label under the bars.
type tick struct {
	X     int
	Label string
}

// The chart's geometry, in SVG user units.
const (
	chartHours  = 24
	chartWidth  = 720
	chartHeight = 180
	chartBottom = 20 // room for the hour labels
	barGap      = 4
)

// hourlyChart draws the 24 hours up to now's: each hour a bar whose parts
// are its payments per status, scaled to the busiest hour.
func hourlyChart(counts []attempts.HourCount, now time.Time) chart {
	last := now.UTC().Truncate(time.Hour)
	first := last.Add(-(chartHours - 1) * time.Hour)
	per := make([]map[lifecycle.Status]int64, chartHours)
	totals := make([]int64, chartHours)
	c := chart{Width: chartWidth, Height: chartHeight, Legend: statuses}
	var total int64
	for _, hc := range counts {
		i := int(hc.Hour.Sub(first) / time.Hour)
		if i < 0 || i >= chartHours {
			continue
		}
		if per[i] == nil {
			per[i] = map[lifecycle.Status]int64{}
		}
		per[i][hc.Status] += hc.N
		totals[i] += hc.N
		total += hc.N
		c.Max = max(c.Max, totals[i])
	}
	slot := chartWidth / chartHours
	plot := chartHeight - chartBottom
	for i := range chartHours {
		hour := first.Add(time.Duration(i) * time.Hour)
		x := i * slot
		if i%3 == 0 {
			c.Ticks = append(c.Ticks, tick{X: x + slot/2, Label: hour.Format("15h")})
		}
		y := plot
		for _, st := range statuses {
			n := per[i][st]
			if n == 0 {
				continue
			}
			h := int(int64(plot-10) * n / c.Max)
			h = max(h, 2)
			y -= h
			c.Bars = append(c.Bars, bar{X: x + barGap/2, Y: y, W: slot - barGap, H: h, Status: st,
				Title: fmt.Sprintf("%s–%s UTC: %d %s", hour.Format("15:04"), hour.Add(time.Hour).Format("15:04"), n, st)})
		}
	}
	c.Summary = summary(total, per, first)
	return c
}

// summary says in words what the chart shows.
func summary(total int64, per []map[lifecycle.Status]int64, first time.Time) string {
	if total == 0 {
		return "No payments in the last 24 hours."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d payments in the last 24 hours, per hour (UTC):", total)
	for i, m := range per {
		if len(m) == 0 {
			continue
		}
		fmt.Fprintf(&b, " %s", first.Add(time.Duration(i)*time.Hour).Format("15h"))
		for _, st := range statuses {
			if m[st] > 0 {
				fmt.Fprintf(&b, " %d %s", m[st], st)
			}
		}
		b.WriteString(";")
	}
	return b.String()
}
