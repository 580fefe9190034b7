package operators

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/db"
)

// Defaults of Config.
const (
	DefaultIdleTimeout = 8 * time.Hour
	// Lifetime is the absolute lifetime of a session, however it is used.
	Lifetime           = 24 * time.Hour
	DefaultMaxFailures = 5
	DefaultWindow      = 15 * time.Minute
	DefaultLockout     = 15 * time.Minute
)

// Config is how sessions and sign-ins behave.
type Config struct {
	// IdleTimeout ends a session not used for this long (CONSOLE_SESSION_TTL).
	IdleTimeout time.Duration
	// MaxFailures failed sign-ins of an email within Window lock it out
	// for Lockout.
	MaxFailures int
	Window      time.Duration
	Lockout     time.Duration
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxFailures == 0 {
		c.MaxFailures = DefaultMaxFailures
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Lockout == 0 {
		c.Lockout = DefaultLockout
	}
	return c
}

// Errors of signing in and of sessions.
var (
	// ErrBadCredentials is a wrong password, an unknown email or a
	// disabled operator: one error, so the answer tells none of them apart.
	ErrBadCredentials = errors.New("wrong email or password")
	// ErrLockedOut is an email with too many failed sign-ins lately.
	ErrLockedOut = errors.New("too many failed sign-ins for this email; try again later")
	// ErrNoSession is a session id that opens no live session.
	ErrNoSession = errors.New("no live session")
)

// Session is a live session of an operator.
type Session struct {
	// Token is the session id, the cookie's value: set only by SignIn.
	Token string
	// CSRF is the session's token that every form carries.
	CSRF     string
	Operator Account
}

// Sessions signs operators in and out and finds their sessions.
type Sessions struct {
	pool *db.Pool
	cfg  Config
}

// NewSessions returns the sessions of pool with cfg (zero fields: defaults).
func NewSessions(pool *db.Pool, cfg Config) *Sessions {
	return &Sessions{pool: pool, cfg: cfg.WithDefaults()}
}

// Config returns the settings in use.
func (s *Sessions) Config() Config { return s.cfg }

// SignIn checks email and password and starts a new session. The attempt
// is counted before the password is checked; a success forgets the count.
// ErrLockedOut while the email is locked out (the password is not even
// checked), ErrBadCredentials for anything else that is not a success.
func (s *Sessions) SignIn(ctx context.Context, email, password string) (Session, error) {
	email = NormalizeEmail(email)
	attempt, err := db.Q.ConsoleLoginAttempt(ctx, s.pool, db.ConsoleLoginAttemptParams{Email: email, WindowMs: s.cfg.Window.Milliseconds()})
	if err != nil {
		return Session{}, err
	}
	if attempt.Locked || int(attempt.Failures) > s.cfg.MaxFailures {
		return Session{}, ErrLockedOut
	}
	op, err := db.Q.OperatorGetByEmail(ctx, s.pool, email)
	if err = db.Translate(err); err != nil && !errors.Is(err, db.ErrNotFound) {
		return Session{}, err
	}
	ok, cerr := checkPassword(ctx, password, op.PasswordHash)
	if cerr != nil {
		return Session{}, cerr
	}
	if !ok || err != nil || op.DisabledAt != nil {
		return Session{}, s.failed(ctx, email)
	}
	return s.start(ctx, op)
}

// failed records that the attempt failed: the MaxFailures-th of a window
// locks the email out. It returns ErrBadCredentials.
func (s *Sessions) failed(ctx context.Context, email string) error {
	if err := db.Q.ConsoleLoginLock(ctx, s.pool, db.ConsoleLoginLockParams{
		Email: email, LockMs: s.cfg.Lockout.Milliseconds(), MaxFailures: int32(s.cfg.MaxFailures),
	}); err != nil {
		return err
	}
	if _, err := db.Q.ConsoleLoginPrune(ctx, s.pool, max(s.cfg.Window, s.cfg.Lockout).Milliseconds()); err != nil {
		return err
	}
	return ErrBadCredentials
}

// start opens a session for op with a fresh id and CSRF token, forgets the
// email's failures, and drops a batch of expired sessions, in one transaction.
func (s *Sessions) start(ctx context.Context, op db.Operator) (Session, error) {
	sess := Session{Token: rand.Text(), CSRF: rand.Text(), Operator: account(op)}
	sum := sha256.Sum256([]byte(sess.Token))
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := db.Q.ConsoleSessionInsert(ctx, tx, db.ConsoleSessionInsertParams{IDSha256: sum[:], OperatorID: op.ID, CsrfToken: sess.CSRF}); err != nil {
			return err
		}
		if err := db.Q.ConsoleLoginSucceeded(ctx, tx, op.Email); err != nil {
			return err
		}
		_, err := db.Q.ConsoleSessionDeleteExpired(ctx, tx, db.ConsoleSessionDeleteExpiredParams{
			LifetimeMs: Lifetime.Milliseconds(), IdleMs: s.cfg.IdleTimeout.Milliseconds(),
		})
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("start session: %w", err)
	}
	return sess, nil
}

// Find returns the live session whose id is token and records its use;
// ErrNoSession if there is none (never was, expired, signed out, or its
// operator disabled).
func (s *Sessions) Find(ctx context.Context, token string) (Session, error) {
	if token == "" {
		return Session{}, ErrNoSession
	}
	sum := sha256.Sum256([]byte(token))
	row, err := db.Q.ConsoleSessionTouch(ctx, s.pool, db.ConsoleSessionTouchParams{
		IDSha256: sum[:], IdleMs: s.cfg.IdleTimeout.Milliseconds(), LifetimeMs: Lifetime.Milliseconds(),
	})
	if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
		return Session{}, ErrNoSession
	} else if err != nil {
		return Session{}, err
	}
	return Session{CSRF: row.CsrfToken, Operator: Account{ID: row.ID, Email: row.Email, Role: Role(row.Role)}}, nil
}

// SignOut ends the session whose id is token (none: nothing happens).
func (s *Sessions) SignOut(ctx context.Context, token string) error {
	sum := sha256.Sum256([]byte(token))
	return db.Q.ConsoleSessionDelete(ctx, s.pool, sum[:])
}

func account(r db.Operator) Account {
	return Account{ID: r.ID, Email: r.Email, Role: Role(r.Role), CreatedAt: r.CreatedAt, DisabledAt: r.DisabledAt}
}
