package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/metrics"
)

// Endpoints is the tenant's side of the merchant webhooks: its endpoints,
// their deliveries and manual retries (the API under /v1/webhook_endpoints
// and /v1/webhook_deliveries). It works whether or not this pod delivers.
type Endpoints struct {
	pool *db.Pool
	cfg  EndpointsConfig
}

// EndpointsConfig configures Endpoints.
type EndpointsConfig struct {
	// AllowHTTP accepts http:// URLs (MERCHANT_WEBHOOK_ALLOW_HTTP), for
	// development and tests; else only https://.
	AllowHTTP bool
	// Keys are the Idempotency-Key settings of the service (a create's
	// stored answer lives KeyTTL).
	Keys idempotency.Config
}

// NewEndpoints returns the endpoints of the tenants in pool.
func NewEndpoints(pool *db.Pool, cfg EndpointsConfig) *Endpoints {
	return &Endpoints{pool: pool, cfg: cfg}
}

// CreateRequest is a create of an endpoint, with the request's
// Idempotency-Key ("" for none) and fingerprint.
type CreateRequest struct {
	New
	IdempotencyKey string
	Fingerprint    []byte
}

// Reply is the answer of a create: 201 and the endpoint with its secret,
// replayed as stored when the key has one.
type Reply struct {
	Code     int
	Body     []byte
	Replayed bool
}

// Create validates and creates an endpoint with a new secret. With an
// Idempotency-Key, the key and its answer are stored with the endpoint in
// one transaction, and a repeat of the request replays that answer (the
// same secret) and creates nothing; the key is in the tenant's one key
// space, so a payment's or a refund's key answers 422.
func (s *Endpoints) Create(ctx context.Context, req CreateRequest) (Reply, error) {
	if err := req.Validate(s.cfg.AllowHTTP); err != nil {
		return Reply{}, apperr.New(apperr.InvalidRequest, "%s", err.Error())
	}
	do := func(ctx context.Context, tx pgx.Tx, id string) (int, []byte, error) {
		created, err := insertEndpoint(ctx, tx, req.New, id)
		if err != nil {
			return 0, nil, err
		}
		body, err := json.Marshal(created)
		return http.StatusCreated, body, err
	}
	if req.IdempotencyKey == "" {
		var code int
		var body []byte
		err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) (err error) {
			code, body, err = do(ctx, tx, NewEndpointID())
			return err
		})
		return Reply{Code: code, Body: body}, err
	}
	res, err := idempotency.OnceForEndpoint(ctx, s.pool, s.cfg.Keys, req.TenantID, req.IdempotencyKey, req.Fingerprint, NewEndpointID(), do)
	if err != nil {
		return Reply{}, err
	}
	switch res.Outcome {
	case idempotency.Replay:
		metrics.IdempotencyOutcomes.WithLabelValues("replayed").Inc()
		return Reply{Code: res.ResponseCode, Body: res.ResponseBody, Replayed: true}, nil
	case idempotency.Mismatch:
		metrics.IdempotencyOutcomes.WithLabelValues("reused_mismatch").Inc()
		return Reply{}, apperr.New(apperr.IdempotencyKeyReused, "this Idempotency-Key was used for a different request")
	case idempotency.InUse: // not for these keys, which are never stored in progress
		e := apperr.New(apperr.IdempotencyKeyInUse, "a request with this Idempotency-Key is in progress; retry later")
		e.RetryAfter = res.RetryAfter
		return Reply{}, e
	}
	metrics.IdempotencyOutcomes.WithLabelValues("created").Inc()
	return Reply{Code: res.ResponseCode, Body: res.ResponseBody}, nil
}

// insertEndpoint creates the endpoint id of n with a new secret and its
// audit row, under the tenant's lock so that concurrent creates cannot pass
// MaxEndpoints together.
func insertEndpoint(ctx context.Context, tx pgx.Tx, n New, id string) (WithSecret, error) {
	if err := db.Q.EndpointLockTenant(ctx, tx, n.TenantID); err != nil {
		return WithSecret{}, fmt.Errorf("lock the tenant's endpoints: %w", err)
	}
	live, err := db.Q.EndpointCountLive(ctx, tx, n.TenantID)
	if err != nil {
		return WithSecret{}, fmt.Errorf("count endpoints: %w", err)
	}
	if live >= MaxEndpoints {
		return WithSecret{}, apperr.New(apperr.InvalidRequest, "a tenant may have at most %d webhook endpoints; delete one first", MaxEndpoints)
	}
	row, err := db.Q.EndpointInsert(ctx, tx, db.EndpointInsertParams{
		ID: id, TenantID: n.TenantID, Url: n.URL, EventTypes: n.EventTypes, Description: n.Description, Secret: newSecret(),
	})
	if err != nil {
		return WithSecret{}, fmt.Errorf("insert endpoint: %w", err)
	}
	if err := db.Q.EndpointEventInsert(ctx, tx, db.EndpointEventInsertParams{EndpointID: id, Kind: "created"}); err != nil {
		return WithSecret{}, fmt.Errorf("audit endpoint: %w", err)
	}
	return withSecret(row), nil
}

func endpointNotFound(id string) error {
	return apperr.New(apperr.WebhookEndpointNotFound, "no webhook endpoint %q", id)
}

// Get returns the tenant's endpoint id (404 for a deleted one, or another
// tenant's).
func (s *Endpoints) Get(ctx context.Context, tenantID, id string) (Endpoint, error) {
	row, err := db.Q.EndpointGetForTenant(ctx, s.pool, db.EndpointGetForTenantParams{TenantID: tenantID, ID: id})
	if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
		return Endpoint{}, endpointNotFound(id)
	}
	if err != nil {
		return Endpoint{}, err
	}
	return endpointOf(row), nil
}

// List returns a page of the tenant's endpoints, newest first, after the
// endpoint after ("" for the first page; 400 if it is none of the tenant's),
// and whether more follow.
func (s *Endpoints) List(ctx context.Context, tenantID, after string, limit int) ([]Endpoint, bool, error) {
	p := db.EndpointListPageParams{TenantID: tenantID, MaxRows: int32(limit + 1)}
	if after != "" {
		cur, err := db.Q.EndpointGetForTenant(ctx, s.pool, db.EndpointGetForTenantParams{TenantID: tenantID, ID: after})
		if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
			return nil, false, apperr.New(apperr.InvalidRequest, "starting_after names no webhook endpoint of yours")
		}
		if err != nil {
			return nil, false, err
		}
		p.HasCursor, p.AfterCreatedAt, p.AfterID = true, cur.CreatedAt, cur.ID
	}
	rows, err := db.Q.EndpointListPage(ctx, s.pool, p)
	if err != nil {
		return nil, false, db.Translate(err)
	}
	list, more := page(rows, limit, endpointOf)
	return list, more, nil
}

// page is a list of at most limit items made of rows, the answer of a
// query for limit+1 rows, and whether more follow.
func page[R, T any](rows []R, limit int, item func(R) T) ([]T, bool) {
	more := len(rows) > limit
	rows = rows[:min(len(rows), limit)]
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = item(r)
	}
	return out, more
}

// Delete deletes the tenant's endpoint id: its secrets are forgotten and
// its pending deliveries fail ("endpoint deleted"), so no attempt of them is
// claimed afterwards (one already under way finishes).
func (s *Endpoints) Delete(ctx context.Context, tenantID, id string) error {
	return db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		n, err := db.Q.EndpointDelete(ctx, tx, db.EndpointDeleteParams{TenantID: tenantID, ID: id})
		if err != nil {
			return fmt.Errorf("delete endpoint: %w", err)
		}
		if n == 0 {
			return endpointNotFound(id)
		}
		if _, err := db.Q.DeliveryFailForEndpoint(ctx, tx, id); err != nil {
			return fmt.Errorf("end the endpoint's deliveries: %w", err)
		}
		return db.Q.EndpointEventInsert(ctx, tx, db.EndpointEventInsertParams{EndpointID: id, Kind: "deleted"})
	})
}

// RotateSecret gives the tenant's endpoint id a new secret and returns it;
// the old one signs beside it for SecretOverlap.
func (s *Endpoints) RotateSecret(ctx context.Context, tenantID, id string) (WithSecret, error) {
	var out WithSecret
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := db.Q.EndpointRotate(ctx, tx, db.EndpointRotateParams{
			TenantID: tenantID, ID: id, NewSecret: newSecret(), OverlapMs: SecretOverlap.Milliseconds(),
		})
		if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
			return endpointNotFound(id)
		}
		if err != nil {
			return fmt.Errorf("rotate secret: %w", err)
		}
		out = withSecret(row)
		return db.Q.EndpointEventInsert(ctx, tx, db.EndpointEventInsertParams{EndpointID: id, Kind: "secret_rotated"})
	})
	return out, err
}
