package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/metrics"
)

// maxErrorLen bounds outbox.last_error; the full error is in the log.
const maxErrorLen = 500

// batchResult is what one batch did.
type batchResult struct {
	claimed, published, failed, duplicates int
	noStream                               bool  // a publish found no stream to take it
	firstErr                               error // of the failed rows
}

// publishBatch claims due rows, publishes them, waits for their PubAcks and,
// in the transaction that holds the claim, marks the acknowledged rows
// published and the others failed with a backoff. A crash anywhere before the
// commit releases the claim with nothing marked, so the rows are published
// again; their Nats-Msg-Id lets JetStream drop the copies.
func (r *Relay) publishBatch(ctx context.Context, js jetstream.JetStream) (batchResult, error) {
	if ctx.Err() != nil {
		return batchResult{}, nil // shutting down: start nothing new
	}
	// Detached from Run's ctx: on shutdown the batch in flight is settled,
	// not abandoned, so acknowledged rows are marked instead of sent again
	// by the next relay. BatchTimeout bounds it either way.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.BatchTimeout)
	defer cancel()

	var res batchResult
	err := db.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		rows, err := db.Q.OutboxClaim(ctx, tx, int32(r.cfg.BatchSize))
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		res = batchResult{claimed: len(rows)}
		if len(rows) == 0 {
			return nil
		}
		// The claim's locks must not outlive the batch if this relay goes
		// silent (a node without power or network says nothing to the
		// server, which would hold them until its TCP keepalive gives up,
		// hours later): the server ends a transaction idle for BatchTimeout,
		// longer than any wait of a live batch (PublishTimeout).
		if err := db.Q.OutboxBoundIdle(ctx, tx, r.cfg.BatchTimeout.Milliseconds()); err != nil {
			return fmt.Errorf("bound idle claim: %w", err)
		}
		acks := r.publish(ctx, js, rows, &res)
		if h := r.cfg.hooks.afterPublish; h != nil {
			h()
		}
		return r.mark(ctx, tx, rows, acks, &res)
	})
	metrics.OutboxPublishErrors.Add(float64(res.failed))
	if err != nil {
		return batchResult{claimed: res.claimed}, err
	}
	metrics.OutboxPublished.Add(float64(res.published))
	if res.claimed > 0 {
		r.log.Debug("outbox batch", "claimed", res.claimed, "published", res.published,
			"failed", res.failed, "duplicates", res.duplicates)
	}
	if h := r.cfg.hooks.afterBatch; h != nil {
		h(res)
	}
	return res, nil
}

// ack is how a row's publish ended: its failure, or (err nil) when its
// PubAck arrived.
type ack struct {
	err error
	at  time.Time
}

// publish sends every row asynchronously and then waits for the PubAcks, so
// a batch costs about one round trip rather than one per row. It returns
// each row's outcome.
func (r *Relay) publish(ctx context.Context, js jetstream.JetStream, rows []db.OutboxClaimRow, res *batchResult) []ack {
	errs := make([]error, len(rows))
	acked := make([]time.Time, len(rows))
	futures := make([]jetstream.PubAckFuture, len(rows))
	for i, row := range rows {
		data, err := eventFromRow(row).marshal(r.cfg.Source)
		if err != nil {
			errs[i] = fmt.Errorf("envelope: %w", err)
			continue
		}
		if h := r.cfg.hooks.beforePublish; h != nil {
			h(row.ID)
		}
		msg := &nats.Msg{Subject: r.cfg.SubjectPrefix + row.Subject, Data: data, Header: nats.Header{}}
		msg.Header.Set("Content-Type", "application/cloudevents+json")
		// WithExpectStream: a PubAck from another stream (overlapping
		// subjects) must not count as sent.
		futures[i], errs[i] = js.PublishMsgAsync(msg, jetstream.WithMsgID(row.ID), jetstream.WithExpectStream(r.cfg.Stream))
	}

	wait, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	for i, f := range futures {
		if errs[i] != nil {
			continue
		}
		select {
		case pa := <-f.Ok():
			acked[i] = time.Now()
			if pa.Duplicate {
				res.duplicates++
			}
		case err := <-f.Err():
			errs[i] = err
		case <-wait.Done():
			errs[i] = fmt.Errorf("waiting for PubAck: %w", wait.Err())
		}
	}
	acks := make([]ack, len(rows))
	for i := range rows {
		acks[i] = ack{err: errs[i], at: acked[i]}
	}
	return acks
}

// mark records the outcome of each row in the claiming transaction: an
// acknowledged row is published as of its PubAck (published_at).
func (r *Relay) mark(ctx context.Context, tx pgx.Tx, rows []db.OutboxClaimRow, acks []ack, res *batchResult) error {
	var sent, failed, msgs []string
	var ackAges, delays []int64
	now := time.Now()
	for i, row := range rows {
		err := acks[i].err
		if err == nil {
			sent = append(sent, row.ID)
			ackAges = append(ackAges, now.Sub(acks[i].at).Milliseconds())
			continue
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			res.noStream = true
		}
		if res.firstErr == nil {
			res.firstErr = err
		}
		d := backoff(int(row.PublishAttempts)+1, r.cfg.BackoffMin, r.cfg.BackoffMax)
		failed = append(failed, row.ID)
		msgs = append(msgs, truncate(err.Error(), maxErrorLen))
		delays = append(delays, d.Milliseconds())
	}
	res.failed = len(failed)
	if len(sent) > 0 {
		if _, err := db.Q.OutboxMarkPublished(ctx, tx, db.OutboxMarkPublishedParams{Ids: sent, AckAgesMs: ackAges}); err != nil {
			return fmt.Errorf("mark published: %w", err)
		}
		if err := r.fanout(ctx, tx, rows, acks); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		r.log.Warn("outbox publish failed", "rows", len(failed), "first_id", failed[0], "err", res.firstErr)
		_, err := db.Q.OutboxMarkFailed(ctx, tx, db.OutboxMarkFailedParams{Ids: failed, Errors: msgs, DelaysMs: delays})
		if err != nil {
			return fmt.Errorf("mark failed: %w", err)
		}
	}
	res.published = len(sent)
	return nil
}

func eventFromRow(row db.OutboxClaimRow) event {
	ev := event{
		ID: row.ID, Type: row.Type, PaymentID: row.PaymentID, Payload: row.Payload,
		CreatedAt: row.CreatedAt,
	}
	if row.Traceparent != nil {
		ev.Traceparent = *row.Traceparent
	}
	return ev
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
