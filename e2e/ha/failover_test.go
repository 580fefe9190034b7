//go:build ha

package ha

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// maxOutage bounds the longest time clients may go without a 2xx answer in
// any scenario; measured outages are far shorter (docs/operations.md).
const maxOutage = 30 * time.Second

// scenario is one fault played under steady traffic.
type scenario struct {
	name string
	// fault breaks part of the stack and returns once the stack is whole
	// again (every node back and caught up).
	fault func(h *harness, t *testing.T)
}

// TestFailoverUnderTraffic plays the faults of a production HA setup one
// after another on one stack, under steady payment traffic on both pods:
// a database switchover, a crash of the database primary's whole node, the
// loss of the JetStream stream leader, and a crash of the synchronous
// standby. After each one it checks that no payment answered 201 was lost,
// no order was charged twice, no event was lost or published twice, and no
// key stayed locked; and it logs the outage clients saw.
func TestFailoverUnderTraffic(t *testing.T) {
	h := setup(t)
	scenarios := []scenario{
		{"switchover", func(h *harness, t *testing.T) { h.pg.Switchover() }},
		{"crash-primary", (*harness).crashPrimary},
		{"kill-stream-leader", (*harness).killStreamLeader},
		{"kill-standby", (*harness).killStandby},
	}
	var report []string
	for _, sc := range scenarios {
		if !t.Run(sc.name, func(t *testing.T) { report = append(report, h.play(t, sc)) }) {
			break // the stack may not be whole: later scenarios would only add noise
		}
	}
	t.Logf("outages measured:\n%s", strings.Join(report, "\n"))
}

// play runs traffic, lets it settle, applies the fault, waits until the
// service is back to normal by itself, stops the traffic and checks.
func (h *harness) play(t *testing.T, sc scenario) string {
	tr := h.startTraffic(sc.name)
	t.Cleanup(tr.halt)
	tr.waitPaid(t, time.Time{}, 20, time.Minute) // steady before the fault

	faultAt := time.Now()
	sc.fault(h, t)
	whole := time.Now()
	// Back to normal by itself: payments keep being paid once the stack is whole.
	tr.waitPaid(t, whole, 20, time.Minute)
	paid := tr.finish(t)
	h.paid = append(h.paid, paid...)

	o := tr.outage(faultAt)
	commits := commitReport(paid, failedCommits(h.pods, faultAt))
	t.Logf("%s: %s; %s", sc.name, o, commits)
	checkAnswers(t, o)
	require.Less(t, o.maxGap, maxOutage, "longest time without a 2xx answer")

	listening := "relays kept listening"
	if at := h.checkListeners(t, faultAt); !at.IsZero() {
		listening = fmt.Sprintf("relays listening again %s after the fault", at.Sub(faultAt).Round(10*time.Millisecond))
	}
	h.checkInvariants(t)
	delay := h.eventDelay(t, faultAt)
	return fmt.Sprintf("%-19s %s; %s; stack whole %s after the fault; %s; events in the stream at most %s after their transaction began",
		sc.name, o, commits, whole.Sub(faultAt).Round(10*time.Millisecond), listening, delay.Round(10*time.Millisecond))
}

// crashPrimary SIGKILLs the primary's pg_autoctl and Postgres tree, waits
// for the standby's promotion, and restarts the crashed node, which
// rejoins as the new standby.
func (h *harness) crashPrimary(t *testing.T) {
	old := h.pg.Primary()
	old.Crash()
	crashed := time.Now()
	// A cron job started in the middle of the failover waits for the new
	// primary (a bounded wait) instead of failing the run.
	gc := make(chan int, 1)
	go func() {
		_, code := h.reconciler(t, "gc")
		gc <- code
	}()
	promoted := h.pg.WaitWritable(time.Minute, old)
	t.Logf("crashed %s; %s writable after %s", old.Name, promoted.Name, time.Since(crashed).Round(10*time.Millisecond))
	old.Restart()
	require.Equal(t, 0, <-gc, "exit status of reconciler gc started during the failover")
	h.pg.WaitHealthy(2 * time.Minute)
}

// killStreamLeader SIGKILLs the nats-server leading the stream, waits for
// another leader, and restarts the killed server, which catches up.
func (h *harness) killStreamLeader(t *testing.T) {
	leader := h.nats.WaitStreamHealthy(time.Minute, h.js, streamName, "")
	srv := h.nats.Server(leader)
	srv.Kill()
	killed := time.Now()
	next := h.nats.WaitStreamLeader(time.Minute, h.js, streamName, leader)
	t.Logf("killed %s; %s leads the stream after %s", leader, next, time.Since(killed).Round(10*time.Millisecond))
	srv.Restart()
	h.nats.WaitHealthy(time.Minute)
	h.nats.WaitStreamHealthy(time.Minute, h.js, streamName, "")
}

// killStandby crashes the synchronous standby: commits stall until the
// monitor lets the primary go on alone (wait_primary); then the standby is
// restarted and catches up.
func (h *harness) killStandby(t *testing.T) {
	primary := h.pg.Primary()
	standby := h.pg.Secondary()
	standby.Crash()
	crashed := time.Now()
	h.pg.WaitState(time.Minute, primary, "wait_primary")
	t.Logf("crashed %s; %s alone (wait_primary) after %s", standby.Name, primary.Name, time.Since(crashed).Round(10*time.Millisecond))
	standby.Restart()
	h.pg.WaitHealthy(2 * time.Minute)
}
