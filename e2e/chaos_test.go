package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// chaosRounds bounds the chaos test: a few minutes on a two-core machine.
const chaosRounds = 30

// chaosFault is what goes wrong in one round: in its payment's create, or,
// for a manual payment, in its capture or void (the failpoint of that
// path, the simulator's faults with "captures":true).
type chaosFault struct {
	name      string
	failpoint string              // the first request goes to the pod armed with it
	sim       *providersim.Faults // the provider misbehaves until the client has tried a few times
}

// chaosKind is what a round does: pay at once, or authorize and then
// capture (part or all) or void.
type chaosKind string

const (
	chaosPay     chaosKind = "pay"
	chaosCapture chaosKind = "capture"
	chaosVoid    chaosKind = "void"
)

var chaosKinds = []chaosKind{chaosPay, chaosCapture, chaosVoid}

// forKind is f for the path of kind k: the same crash point of the capture
// or void path, the same provider faults applied to captures and voids.
func (f chaosFault) forKind(k chaosKind) chaosFault {
	if k == chaosPay {
		return f
	}
	if f.failpoint != "" {
		f.failpoint = string(k) + "_" + f.failpoint
	}
	if f.sim != nil {
		sim := *f.sim
		sim.Captures = true
		f.sim = &sim
	}
	return f
}

var chaosFaults = []chaosFault{
	{name: "crash " + failpoint.AfterKeyAcquired, failpoint: failpoint.AfterKeyAcquired},
	{name: "crash " + failpoint.AfterProviderCall, failpoint: failpoint.AfterProviderCall},
	{name: "crash " + failpoint.BeforeCompleteCommit, failpoint: failpoint.BeforeCompleteCommit},
	{name: "lost answers", sim: &providersim.Faults{DropAfterCommit: true}},
	{name: "provider 503", sim: &providersim.Faults{ErrorRate: 1.0, ErrorStatus: 503}},
	// Slower than PROVIDER_CALL_TIMEOUT: every call times out, and every
	// charge is made anyway after the caller gave up.
	{name: "provider slow", sim: &providersim.Faults{LatencyMS: 800}},
	{name: "no fault"},
}

// faultTries is how many requests a round's client makes before the
// provider recovers.
const faultTries = 2

// chaosSeed is CHAOS_SEED, or the clock.
func chaosSeed(t *testing.T) uint64 {
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CHAOS_SEED")
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// chaosRig is the chaos test's cluster: two plain pods that clients retry on,
// and one pod per failpoint that a round's first request may be sent to
// (started when a round first needs it).
type chaosRig struct {
	*faultStack
	plain      [2]*proctest.Process
	failpoints map[string]*proctest.Process
	env        []string
}

// armed is the pod armed with failpoint fp.
func (rig *chaosRig) armed(t *testing.T, fp string) *proctest.Process {
	t.Helper()
	if p, ok := rig.failpoints[fp]; ok {
		return p
	}
	p, _ := rig.startPod(t, "pod-"+fp, append(rig.env, "PAYMENTSVC_FAILPOINT="+fp)...)
	rig.failpoints[fp] = p
	return p
}

// chaosOutcome is what a round's client finally got.
type chaosOutcome struct {
	round     int
	fault     string
	kind      chaosKind
	order     string
	declined  bool
	paymentID string
	chargeID  string
	captured  int64 // what the round's capture took
}

// Rounds of payments under random crashes and provider faults: paid at
// once, or authorized and then captured (part or all) or voided, the fault
// striking the create of the first kind and the capture or void of the
// others. Each round's client retries with the same key, alternating pods,
// until it gets a final answer (201, or 402 for the declined card).
// Afterwards the global invariants must hold: one payment per order,
// exactly one succeeded charge per SUCCEEDED payment and none for any
// other; at the provider, each payment captured at most once and never
// more than authorized, none both captured and voided, and our
// amount_captured the provider's; no key locked past its TTL, every key
// that answered for good holding its response, and every audit trail a
// path of its state machine.
func TestChaosCrashesAndFaultsKeepInvariants(t *testing.T) {
	t.Parallel()
	seed := chaosSeed(t)
	t.Logf("chaos seed %d (reproduce with CHAOS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	rig := &chaosRig{faultStack: newFaultStack(t), failpoints: map[string]*proctest.Process{}, env: shortTimings(shortLockTTL)}
	rig.plain[0], _ = rig.startPod(t, "pod-a", rig.env...)
	rig.plain[1], _ = rig.startPod(t, "pod-b", rig.env...)

	start := time.Now()
	var outcomes []chaosOutcome
	for i := range chaosRounds {
		f := chaosFaults[rng.IntN(len(chaosFaults))]
		k := chaosKinds[rng.IntN(len(chaosKinds))]
		declined := rng.IntN(4) == 0
		amount := int64(100 + rng.IntN(9900))
		capture := int64(0) // all
		if rng.IntN(2) == 0 {
			capture = 1 + rng.Int64N(amount)
		}
		o := rig.playRound(t, i, f, k, declined, amount, capture)
		t.Logf("round %2d: %-7s %-30s declined=%-5v -> %s %s captured %d", i, k, f.name, declined, o.paymentID, o.chargeID, o.captured)
		outcomes = append(outcomes, o)
	}
	t.Logf("%d rounds in %s", chaosRounds, time.Since(start).Round(time.Millisecond))

	rig.checkInvariants(t, outcomes)
}

// playRound runs one round of kind k under fault f until it is final.
func (rig *chaosRig) playRound(t *testing.T, round int, f chaosFault, k chaosKind, declined bool, amount, capture int64) chaosOutcome {
	t.Helper()
	o := chaosOutcome{round: round, fault: f.name, kind: k, order: fmt.Sprintf("chaos-%02d", round), declined: declined}
	key := "chaos-key-" + strconv.Itoa(round)
	body := apiclient.Visa(o.order, amount)
	if declined {
		body.PaymentMethod = "pm_card_declined"
	}
	payFault := f
	if k != chaosPay {
		body.CaptureMethod = "manual"
		payFault = chaosFault{name: "no fault"}
	}
	final := rig.untilFinal(t, round, payFault, func(c *proctest.Client) (apiclient.Response, error) { return c.Pay(key, body) })
	o.paymentID = final.Str("id")
	o.chargeID = final.Str("provider_charge_id")
	switch {
	case declined:
		require.Equal(t, 402, final.Status, "round %d: %s", round, final)
		require.Equal(t, "FAILED", final.Str("status"))
		require.Equal(t, declineCode(t), final.Str("failure_code"))
	case k == chaosPay:
		require.Equal(t, 201, final.Status, "round %d: %s", round, final)
		require.Equal(t, "SUCCEEDED", final.Str("status"))
		require.NotEmpty(t, o.chargeID)
	default:
		require.Equal(t, 201, final.Status, "round %d: %s", round, final)
		require.Equal(t, "AUTHORIZED", final.Str("status"))
		require.NotEmpty(t, o.chargeID)
	}
	// Any pod now replays the stored answer.
	replay := rig.client(rig.plain[(round+1)%2]).MustPay(t, key, body)
	require.Equal(t, final.Status, replay.Status, "round %d replay: %s", round, replay)
	require.True(t, replay.Replayed(), "round %d replay", round)
	require.JSONEq(t, string(final.Raw), string(replay.Raw))
	if declined || k == chaosPay {
		return o
	}

	what, opBody := "voids", `{"reason":"requested_by_customer"}`
	if k == chaosCapture {
		what, opBody = "captures", `{}`
		if capture > 0 {
			opBody = fmt.Sprintf(`{"amount":%d}`, capture)
		}
	}
	opKey := "chaos-" + string(k) + "-" + strconv.Itoa(round)
	op := rig.untilFinal(t, round, f.forKind(k), func(c *proctest.Client) (apiclient.Response, error) {
		return holdOn(c, o.paymentID, what, opKey, opBody)
	})
	require.Equal(t, 201, op.Status, "round %d %s: %s", round, k, op)
	require.Equal(t, "SUCCEEDED", op.Str("status"))
	again := mustHold(t, rig.client(rig.plain[round%2]), o.paymentID, what, opKey, opBody)
	require.True(t, again.Status == 201 && again.Replayed(), "round %d %s replay: %s", round, k, again)
	require.JSONEq(t, string(op.Raw), string(again.Raw))
	if k == chaosCapture {
		o.captured = amount
		if capture > 0 {
			o.captured = capture
		}
	}
	return o
}

// untilFinal sends a round's request (send) under fault f, with the same
// key, alternating pods, until it is answered for good (201 or 402).
func (rig *chaosRig) untilFinal(t *testing.T, round int, f chaosFault, send func(*proctest.Client) (apiclient.Response, error)) apiclient.Response {
	t.Helper()
	if f.sim != nil {
		rig.sim.SetFaults(t, *f.sim)
	}
	tries := 0
	var final apiclient.Response
	testkit.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d (%s) gets a final answer", round, f.name), func() bool {
		if tries == faultTries && f.sim != nil {
			rig.sim.ClearFaults(t)
		}
		pod := rig.plain[(round+tries)%2]
		if tries == 0 && f.failpoint != "" {
			pod = rig.armed(t, f.failpoint)
		}
		tries++
		r, err := send(rig.client(pod))
		if err != nil {
			rig.restartCrashed(t, pod, err)
			return false
		}
		switch r.Status {
		case 201, 402:
			final = r
			return true
		case 202, 409, 503: // unknown, busy, breaker open: retry with the same key
			return false
		}
		require.Failf(t, "unexpected answer", "round %d (%s): %s", round, f.name, r)
		return false
	})
	if f.sim != nil && tries <= faultTries {
		rig.sim.ClearFaults(t)
	}
	return final
}

// restartCrashed restarts pod after a transport error, which only a pod
// armed with a failpoint may cause, by dying with status 137. The restart
// overlaps the dead owner's lock TTL that the retry has to wait out anyway.
func (rig *chaosRig) restartCrashed(t *testing.T, pod *proctest.Process, err error) {
	t.Helper()
	for _, p := range rig.plain {
		require.NotSame(t, p, pod, "%s is not armed with a failpoint, yet the request failed: %v", pod.Name, err)
	}
	testkit.Eventually(t, 30*time.Second, pod.Name+" exits", pod.Exited)
	require.Equal(t, 137, pod.ExitCode(), "%s's exit status", pod.Name)
	pod.Restart()
}

// checkInvariants checks the database and the provider after all rounds.
func (rig *chaosRig) checkInvariants(t *testing.T, outcomes []chaosOutcome) {
	t.Helper()
	ctx := context.Background()
	pool := rig.db.Pool

	type attempt struct {
		order, status, method string
		chargeID              *string
		amount, captured      int64
	}
	got := map[string]attempt{}
	perOrder := map[string]int{}
	rows, err := pool.Query(ctx, "SELECT id, order_id, status, provider_charge_id, capture_method, amount, amount_captured FROM payment_attempts")
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var a attempt
		require.NoError(t, rows.Scan(&id, &a.order, &a.status, &a.chargeID, &a.method, &a.amount, &a.captured))
		got[id] = a
		perOrder[a.order]++
	}
	require.NoError(t, rows.Err())

	// One payment per order, final, as its client was told.
	require.Len(t, got, len(outcomes), "one attempt per round")
	for _, o := range outcomes {
		require.Equal(t, 1, perOrder[o.order], "payments of %s", o.order)
		a, ok := got[o.paymentID]
		require.True(t, ok, "round %d: payment %s", o.round, o.paymentID)
		require.Equal(t, o.order, a.order)
		want := map[chaosKind]string{chaosPay: "SUCCEEDED", chaosCapture: "SUCCEEDED", chaosVoid: "CANCELED"}[o.kind]
		if o.declined {
			want = "FAILED"
		}
		require.Equal(t, want, a.status, "round %d (%s %s)", o.round, o.kind, o.fault)
		if o.kind == chaosCapture && !o.declined {
			require.Equal(t, o.captured, a.captured, "round %d: what the capture took", o.round)
		}
	}

	// Exactly one succeeded charge per SUCCEEDED payment, none otherwise,
	// and no charge the service does not know of.
	succeeded := map[string][]string{}
	for _, c := range rig.sim.Charges(t) {
		a, known := got[c.Reference]
		require.True(t, known, "charge %s has reference %q, which is no payment of ours", c.ID, c.Reference)
		if c.Status == providersim.StatusSucceeded {
			succeeded[c.Reference] = append(succeeded[c.Reference], c.ID)
		}
		// Captured at most once (one capture key) and never more than
		// authorized, never both captured and voided, and what we say it
		// captured is what it did.
		require.False(t, c.CaptureKey != nil && c.VoidKey != nil, "charge %s of %s both captured and voided", c.ID, c.Reference)
		require.LessOrEqual(t, c.AmountCaptured, c.Amount, "charge %s captured more than authorized", c.ID)
		require.Equal(t, c.AmountCaptured, a.captured, "amount_captured of %s (%s) and of its charge %s", c.Reference, a.status, c.ID)
	}
	for id, a := range got {
		if a.status == "SUCCEEDED" {
			require.Len(t, succeeded[id], 1, "succeeded charges of %s (%s)", id, a.order)
			require.NotNil(t, a.chargeID)
			require.Equal(t, succeeded[id][0], *a.chargeID)
		} else {
			require.Empty(t, succeeded[id], "succeeded charges of %s payment %s (%s)", a.status, id, a.order)
		}
	}

	// No key is locked past its TTL, and every final payment's key holds its
	// response (so a retry replays it).
	var n int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM idempotency_keys WHERE locked_until > now() + $1::interval", shortLockTTL.String()).Scan(&n))
	require.Zero(t, n, "keys locked beyond the lock TTL")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys k JOIN payment_attempts a ON a.id = k.attempt_id
		WHERE a.status IN ('SUCCEEDED', 'FAILED', 'CANCELED', 'AUTHORIZED') AND (k.response_code IS NULL OR k.locked_until IS NOT NULL)`).Scan(&n))
	require.Zero(t, n, "keys of answered payments without their response, or still locked")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys k JOIN captures c ON c.id = k.capture_id
		WHERE c.status IN ('SUCCEEDED', 'FAILED') AND (k.response_code IS NULL OR k.locked_until IS NOT NULL)`).Scan(&n))
	require.Zero(t, n, "keys of final captures and voids without their response, or still locked")
	// At most one capture or void that is not FAILED per payment, and one
	// SUCCEEDED per round that captured or voided.
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT payment_id FROM captures WHERE status <> 'FAILED'
		GROUP BY payment_id HAVING count(*) > 1) AS d`).Scan(&n))
	require.Zero(t, n, "payments with two live captures or voids")
	var ops int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM captures WHERE status = 'SUCCEEDED'`).Scan(&ops))
	wantOps := 0
	for _, o := range outcomes {
		if o.kind != chaosPay && !o.declined {
			wantOps++
		}
	}
	require.Equal(t, wantOps, ops, "one SUCCEEDED capture or void per round that made one")

	// Every audit trail is a path of the state machine that ends in the
	// payment's status, each row starting where the previous one ended.
	trails := map[string][]attempts.Status{}
	rows, err = pool.Query(ctx, "SELECT attempt_id, from_status, to_status FROM payment_attempt_events ORDER BY id")
	require.NoError(t, err)
	for rows.Next() {
		var id, to string
		var from *string
		require.NoError(t, rows.Scan(&id, &from, &to))
		prev := trails[id]
		if len(prev) == 0 {
			require.Nil(t, from, "first event of %s", id)
		} else {
			require.NotNil(t, from, "event of %s after %v", id, prev)
			require.Equal(t, string(prev[len(prev)-1]), *from, "event of %s after %v", id, prev)
		}
		trails[id] = append(prev, attempts.Status(to))
	}
	require.NoError(t, rows.Err())
	for id, a := range got {
		trail := trails[id]
		machine := lifecycle.Operation
		if a.method == "manual" {
			machine = lifecycle.Manual
		}
		require.True(t, machine.LegalPath(trail), "trail of %s (%s): %v", id, a.method, trail)
		require.Equal(t, a.status, string(trail[len(trail)-1]), "trail of %s: %v", id, trail)
	}
	// Every capture's and void's audit trail is a path of an operation's machine.
	opTrails := map[string][]lifecycle.Status{}
	rows, err = pool.Query(ctx, "SELECT capture_id, to_status FROM capture_events ORDER BY id")
	require.NoError(t, err)
	for rows.Next() {
		var id, to string
		require.NoError(t, rows.Scan(&id, &to))
		opTrails[id] = append(opTrails[id], lifecycle.Status(to))
	}
	require.NoError(t, rows.Err())
	for id, trail := range opTrails {
		require.True(t, lifecycle.LegalPath(trail), "trail of %s: %v", id, trail)
	}
}
