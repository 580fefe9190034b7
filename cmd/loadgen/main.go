// Command loadgen is a closed-loop load generator against a running
// paymentsvc over HTTP: -c clients each send one request, wait for its
// answer, and send the next, for -d or until -n requests in total.
//
// Modes:
//
//	create  every request a new Idempotency-Key and order id
//	replay  one payment is created first, then every request re-sends its
//	        key and body (each answer should be 201 Idempotent-Replayed)
//	storm   concurrent requests sharing a small set of keys (c/4 at a time,
//	        a new set every few rounds): a 201/409 idempotency_key_in_use mix,
//	        never a double charge
//
// It prints requests/s, p50/p95/p99/max latency, the count per HTTP status
// and a final JSON line. With -sim-url it then checks the money: the
// provider simulator's succeeded charges referencing the run's payments equal
// the run's SUCCEEDED payments (read with GET /v1/payments, or from
// -database-url), and no payment has more than one charge. A double charge or
// a mismatch is printed loudly and the exit status is 1.
//
// The API key is never printed.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/ids"
)

type config struct {
	url, apiKey, mode, simURL, databaseURL string
	c                                      int
	d                                      time.Duration
	n                                      int64
	amount                                 int64
	timeout                                time.Duration
}

func main() {
	var cfg config
	flag.StringVar(&cfg.url, "url", "http://127.0.0.1:8080", "paymentsvc base URL")
	flag.StringVar(&cfg.apiKey, "api-key", "", "tenant API key (Authorization: Bearer)")
	flag.StringVar(&cfg.mode, "mode", "create", "create, replay or storm")
	flag.IntVar(&cfg.c, "c", 16, "concurrency: clients, each one request at a time")
	flag.DurationVar(&cfg.d, "d", 10*time.Second, "duration (ignored when -n is set)")
	flag.Int64Var(&cfg.n, "n", 0, "total requests (0: run for -d)")
	flag.StringVar(&cfg.simURL, "sim-url", "", "provider simulator base URL: check the money afterwards")
	flag.StringVar(&cfg.databaseURL, "database-url", "", "read the payments' statuses from this database for the money check instead of GET /v1/payments")
	flag.Int64Var(&cfg.amount, "amount", 500, "amount of each payment, in minor units")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "timeout of one request")
	flag.Parse()
	if cfg.apiKey == "" || cfg.c < 1 || (cfg.mode != "create" && cfg.mode != "replay" && cfg.mode != "storm") {
		fmt.Fprintln(os.Stderr, "loadgen: -api-key is required, -c ≥ 1, -mode create|replay|storm")
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

// result is what one client saw.
type result struct {
	lat      []time.Duration
	st       counts
	replayed int64
	ids      map[string]struct{} // payment ids answered with 201
	problems []string            // unexpected answers, a few
}

func run(cfg config) int {
	ctx := context.Background()
	hc := &http.Client{Timeout: cfg.timeout, Transport: &http.Transport{
		MaxIdleConns: cfg.c * 2, MaxIdleConnsPerHost: cfg.c * 2, IdleConnTimeout: 90 * time.Second,
	}}
	g := &gen{cfg: cfg, hc: hc, run: ids.New("", 6)}
	if cfg.mode == "replay" {
		code, _, id, err := g.post(ctx, g.key(0), g.body(0))
		if err != nil || code != http.StatusCreated {
			fmt.Fprintf(os.Stderr, "loadgen: replay: creating the payment: %d %v\n", code, err)
			return 1
		}
		g.replayID = id
	}

	var seq atomic.Int64
	var deadline time.Time
	if cfg.n <= 0 {
		deadline = time.Now().Add(cfg.d)
	}
	results := make([]*result, cfg.c)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < cfg.c; w++ {
		r := &result{st: counts{}, ids: map[string]struct{}{}}
		results[w] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := seq.Add(1) - 1
				if cfg.n > 0 && i >= cfg.n {
					return
				}
				if cfg.n <= 0 && time.Now().After(deadline) {
					return
				}
				g.one(ctx, i, r)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	all := &result{st: counts{}, ids: map[string]struct{}{}}
	for _, r := range results {
		all.lat = append(all.lat, r.lat...)
		all.st.merge(r.st)
		all.replayed += r.replayed
		for id := range r.ids {
			all.ids[id] = struct{}{}
		}
		all.problems = append(all.problems, r.problems...)
	}
	if g.replayID != "" {
		all.ids[g.replayID] = struct{}{}
	}
	s := summarize(cfg.mode, cfg.c, all.lat, all.st, elapsed)
	s.Replayed = all.replayed
	s.Payments = len(all.ids)
	fmt.Printf("mode=%s c=%d requests=%d in %.2fs: %.1f req/s\n", s.Mode, s.Concurrency, s.Requests, s.Seconds, s.RPS)
	fmt.Printf("latency ms: mean %.2f  p50 %.2f  p95 %.2f  p99 %.2f  max %.2f\n", s.MeanMs, s.P50ms, s.P95ms, s.P99ms, s.MaxMs)
	for _, k := range all.st.keys() {
		fmt.Printf("  %s: %d\n", k, all.st[k])
	}
	fmt.Printf("  replayed (Idempotent-Replayed: true): %d; distinct payments: %d\n", s.Replayed, s.Payments)
	for i, p := range all.problems {
		if i == 5 {
			break
		}
		fmt.Fprintf(os.Stderr, "unexpected answer: %s\n", p)
	}

	exit := 0
	if cfg.simURL != "" {
		m, err := g.money(ctx, all.ids)
		if err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: money check could not run: %v\n", err)
			exit = 1
		} else {
			s.Money = &m
			if m.OK {
				fmt.Printf("money check OK: %d payments, %d SUCCEEDED, %d succeeded charges, no double charge\n", m.Payments, m.SucceededPayments, m.SucceededCharges)
			} else {
				fmt.Fprintf(os.Stderr, "\n!!!!!!!! MONEY CHECK FAILED: %s !!!!!!!!\n", m.Problem)
				for i, id := range append(m.DoubleCharged, m.Missing...) {
					if i == 10 {
						break
					}
					fmt.Fprintf(os.Stderr, "  payment %s\n", id)
				}
				exit = 1
			}
		}
	}
	line, _ := json.Marshal(s)
	fmt.Println(string(line))
	return exit
}

// gen makes the requests of a run.
type gen struct {
	cfg      config
	hc       *http.Client
	run      string // unique per run, in every key and order id
	replayID string
}

// stormRounds is how many requests per key of a storm's key set are sent
// before the next set of keys is taken.
const stormRounds = 8

// slot is the key/order index of request i: its own for create, always 0
// for replay, and for storm one of c/4 keys, a new set every stormRounds
// requests per key.
func slot(mode string, c int, i int64) int64 {
	switch mode {
	case "replay":
		return 0
	case "storm":
		k := int64(max(1, c/4))
		return (i/(k*stormRounds))*k + i%k
	}
	return i
}

func (g *gen) key(n int64) string { return fmt.Sprintf("lg-%s-%d", g.run, n) }

func (g *gen) body(n int64) []byte {
	return fmt.Appendf(nil, `{"order_id":"lg-%s-%d","amount":%d,"currency":"USD","payment_method":"pm_card_visa"}`, g.run, n, g.cfg.amount)
}

func (g *gen) one(ctx context.Context, i int64, r *result) {
	n := slot(g.cfg.mode, g.cfg.c, i)
	t0 := time.Now()
	code, replayed, id, err := g.post(ctx, g.key(n), g.body(n))
	r.lat = append(r.lat, time.Since(t0))
	r.st.add(code, err)
	if replayed {
		r.replayed++
	}
	if code == http.StatusCreated && id != "" {
		r.ids[id] = struct{}{}
	}
	expected := code == http.StatusCreated || (g.cfg.mode == "storm" && code == http.StatusConflict)
	if g.cfg.mode == "replay" && !replayed {
		expected = false
	}
	if (err != nil || !expected) && len(r.problems) < 5 {
		r.problems = append(r.problems, fmt.Sprintf("%d replayed=%v %v", code, replayed, err))
	}
}

// post sends one create and returns the status, whether it was replayed and
// the payment id of a 201.
func (g *gen) post(ctx context.Context, key string, body []byte) (int, bool, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.cfg.url+"/v1/payments", bytes.NewReader(body))
	if err != nil {
		return 0, false, "", err
	}
	req.Header.Set("Authorization", "Bearer "+g.cfg.apiKey)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil {
		return 0, false, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, "", err
	}
	var id string
	if resp.StatusCode == http.StatusCreated {
		var p struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &p) == nil {
			id = p.ID
		}
	}
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", id, nil
}

// money reads the statuses of the run's payments and the simulator's
// charges, and checks them (checkMoney).
func (g *gen) money(ctx context.Context, ids map[string]struct{}) (moneyResult, error) {
	statuses := make(map[string]string, len(ids))
	for id := range ids {
		statuses[id] = ""
	}
	var err error
	if g.cfg.databaseURL != "" {
		err = statusesFromDB(ctx, g.cfg.databaseURL, statuses)
	} else {
		err = g.statusesFromAPI(ctx, statuses)
	}
	if err != nil {
		return moneyResult{}, err
	}
	charges, err := apiclient.Sim{URL: g.cfg.simURL}.Charges(ctx)
	if err != nil {
		return moneyResult{}, err
	}
	return checkMoney(statuses, charges), nil
}

// statusesFromAPI pages GET /v1/payments (newest first) until every payment
// of the run has been seen or the list ends.
func (g *gen) statusesFromAPI(ctx context.Context, statuses map[string]string) error {
	missing := len(statuses)
	after := ""
	for missing > 0 {
		q := url.Values{"limit": {"100"}}
		if after != "" {
			q.Set("starting_after", after)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.cfg.url+"/v1/payments?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+g.cfg.apiKey)
		resp, err := g.hc.Do(req)
		if err != nil {
			return err
		}
		var page struct {
			Data []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				time.Sleep(time.Second)
				continue
			}
			return fmt.Errorf("GET /v1/payments: %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("GET /v1/payments: %w", err)
		}
		for _, p := range page.Data {
			if st, ours := statuses[p.ID]; ours && st == "" {
				statuses[p.ID] = p.Status
				missing--
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			break
		}
		after = page.Data[len(page.Data)-1].ID
	}
	return nil
}

func statusesFromDB(ctx context.Context, dsn string, statuses map[string]string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	ids := make([]string, 0, len(statuses))
	for id := range statuses {
		ids = append(ids, id)
	}
	rows, err := conn.Query(ctx, `SELECT id, status FROM payment_attempts WHERE id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return err
		}
		statuses[id] = st
	}
	return rows.Err()
}
