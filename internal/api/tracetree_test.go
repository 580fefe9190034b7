package api_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// printTree logs the span tree under root, with kinds and durations (on a
// failure, to see what the trace looked like).
func printTree(t *testing.T, byID map[trace.SpanID]sdktrace.ReadOnlySpan, root sdktrace.ReadOnlySpan) {
	kids := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	for _, s := range byID {
		kids[s.Parent().SpanID()] = append(kids[s.Parent().SpanID()], s)
	}
	var walk func(s sdktrace.ReadOnlySpan, d int)
	var b strings.Builder
	walk = func(s sdktrace.ReadOnlySpan, d int) {
		fmt.Fprintf(&b, "%s%s [%s] %v\n", strings.Repeat("  ", d), s.Name(), s.SpanKind(), s.EndTime().Sub(s.StartTime()))
		k := kids[s.SpanContext().SpanID()]
		sort.Slice(k, func(i, j int) bool { return k[i].StartTime().Before(k[j].StartTime()) })
		for _, c := range k {
			walk(c, d+1)
		}
	}
	walk(root, 0)
	t.Log("\n" + b.String())
}
