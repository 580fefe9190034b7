package operators_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestCreateStoresOnlyASlowSaltedHash: the generated password is at least 20
// characters, shown once; the row holds an argon2id hash, salted (two
// operators' hashes differ), never the password.
func TestCreateStoresOnlyASlowSaltedHash(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	a := testdb.Operator(t, d.Pool, "Ann@Example.COM", operators.Admin)
	b := testdb.Operator(t, d.Pool, "", operators.Viewer)
	require.Equal(t, "ann@example.com", a.Email)
	require.GreaterOrEqual(t, len(a.Password), 20)
	require.NotEqual(t, a.Password, b.Password)
	var hashes []string
	rows, err := d.Pool.Query(t.Context(), `SELECT password_hash FROM operators ORDER BY email`)
	require.NoError(t, err)
	for rows.Next() {
		var h string
		require.NoError(t, rows.Scan(&h))
		hashes = append(hashes, h)
	}
	require.NoError(t, rows.Err())
	require.Len(t, hashes, 2)
	for _, h := range hashes {
		require.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$"), h)
		require.NotContains(t, h, a.Password)
		require.NotContains(t, h, b.Password)
	}
	require.NotEqual(t, hashes[0], hashes[1])

	_, err = operators.Create(t.Context(), d.Pool, "ann@example.com", operators.Viewer)
	require.ErrorIs(t, err, operators.ErrExists)
	_, err = operators.Create(t.Context(), d.Pool, "not-an-email", operators.Viewer)
	require.ErrorIs(t, err, operators.ErrInvalid)
	_, err = operators.Create(t.Context(), d.Pool, "x@example.com", "root")
	require.ErrorIs(t, err, operators.ErrInvalid)
	list, err := operators.List(t.Context(), d.Pool)
	require.NoError(t, err)
	require.Len(t, list, 2, "nothing made by the refused calls")
}

// TestSignInStartsANewSessionStoredHashed: each sign-in gets a new id of at
// least 128 bits and its own CSRF token; the table holds the id's SHA-256
// only; Find opens it; SignOut ends it.
func TestSignInStartsANewSessionStoredHashed(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	op := testdb.Operator(t, d.Pool, "", operators.Operator)
	s := operators.NewSessions(d.Pool, operators.Config{})
	first, err := s.SignIn(t.Context(), strings.ToUpper(op.Email), op.Password)
	require.NoError(t, err)
	second, err := s.SignIn(t.Context(), op.Email, op.Password)
	require.NoError(t, err)
	require.NotEqual(t, first.Token, second.Token)
	require.NotEqual(t, first.CSRF, second.CSRF)
	require.GreaterOrEqual(t, len(first.Token)*5, 128, "base32: 5 bits a character")
	require.Equal(t, op.Email, first.Operator.Email)
	require.Equal(t, operators.Operator, first.Operator.Role)

	var stored [][]byte
	rows, err := d.Pool.Query(t.Context(), `SELECT id_sha256 FROM console_sessions`)
	require.NoError(t, err)
	for rows.Next() {
		var b []byte
		require.NoError(t, rows.Scan(&b))
		stored = append(stored, b)
	}
	require.NoError(t, rows.Err())
	sum := sha256.Sum256([]byte(first.Token))
	require.Len(t, stored, 2)
	require.Contains(t, stored, sum[:])

	found, err := s.Find(t.Context(), first.Token)
	require.NoError(t, err)
	require.Equal(t, first.CSRF, found.CSRF)
	require.Equal(t, op.Email, found.Operator.Email)
	require.NoError(t, s.SignOut(t.Context(), first.Token))
	_, err = s.Find(t.Context(), first.Token)
	require.ErrorIs(t, err, operators.ErrNoSession)
	_, err = s.Find(t.Context(), second.Token)
	require.NoError(t, err, "the other session lives on")
	_, err = s.Find(t.Context(), "")
	require.ErrorIs(t, err, operators.ErrNoSession)
}

// TestSessionsExpire: idle past the timeout, or older than 24 h however
// used, a session opens nothing (by the database clock).
func TestSessionsExpire(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	op := testdb.Operator(t, d.Pool, "", operators.Viewer)
	s := operators.NewSessions(d.Pool, operators.Config{IdleTimeout: operators.DefaultIdleTimeout})
	idle, err := s.SignIn(t.Context(), op.Email, op.Password)
	require.NoError(t, err)
	old, err := s.SignIn(t.Context(), op.Email, op.Password)
	require.NoError(t, err)
	live, err := s.SignIn(t.Context(), op.Email, op.Password)
	require.NoError(t, err)
	age := func(token, col, ago string) {
		sum := sha256.Sum256([]byte(token))
		_, err := d.Pool.Exec(t.Context(), `UPDATE console_sessions SET `+col+` = now() - $2::interval WHERE id_sha256 = $1`, sum[:], ago)
		require.NoError(t, err)
	}
	age(idle.Token, "last_seen_at", "8 hours 1 second")
	age(old.Token, "created_at", "24 hours 1 second") // seen just now, but too old
	age(live.Token, "last_seen_at", "7 hours 59 minutes")
	for _, tok := range []string{idle.Token, old.Token} {
		_, err := s.Find(t.Context(), tok)
		require.ErrorIs(t, err, operators.ErrNoSession)
	}
	_, err = s.Find(t.Context(), live.Token)
	require.NoError(t, err)
}

// TestDisableEndsSessionsAndSignIns: a disabled operator's sessions open
// nothing at once, and its right password is refused like a wrong one.
func TestDisableEndsSessionsAndSignIns(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	op := testdb.Operator(t, d.Pool, "", operators.Admin)
	s := operators.NewSessions(d.Pool, operators.Config{})
	sess, err := s.SignIn(t.Context(), op.Email, op.Password)
	require.NoError(t, err)
	require.NoError(t, operators.Disable(t.Context(), d.Pool, op.Email))
	_, err = s.Find(t.Context(), sess.Token)
	require.ErrorIs(t, err, operators.ErrNoSession)
	_, err = s.SignIn(t.Context(), op.Email, op.Password)
	require.ErrorIs(t, err, operators.ErrBadCredentials)
	require.ErrorIs(t, operators.Disable(t.Context(), d.Pool, "nobody@example.com"), operators.ErrNotFound)
	var n int
	require.NoError(t, d.Pool.QueryRow(t.Context(), `SELECT count(*) FROM console_sessions`).Scan(&n))
	require.Zero(t, n)
}

// TestLockoutAfterFiveFailures: five failures for an email within the
// window lock it out (even the right password answers ErrLockedOut), the
// same for an email nobody has; another email is not affected; once the
// lockout is over, the right password signs in.
func TestLockoutAfterFiveFailures(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	op := testdb.Operator(t, d.Pool, "", operators.Operator)
	other := testdb.Operator(t, d.Pool, "", operators.Operator)
	s := operators.NewSessions(d.Pool, operators.Config{})
	ghost := testkit.RandomID("ghost-") + "@example.com"
	for _, email := range []string{op.Email, ghost} {
		for i := range 5 {
			_, err := s.SignIn(t.Context(), email, "wrong-password")
			require.ErrorIs(t, err, operators.ErrBadCredentials, "failure %d of %s", i+1, email)
		}
		_, err := s.SignIn(t.Context(), email, "wrong-password")
		require.ErrorIs(t, err, operators.ErrLockedOut, email)
	}
	_, err := s.SignIn(t.Context(), op.Email, op.Password)
	require.ErrorIs(t, err, operators.ErrLockedOut, "locked out whatever the password")
	_, err = s.SignIn(t.Context(), other.Email, other.Password)
	require.NoError(t, err)

	_, err = d.Pool.Exec(t.Context(), `UPDATE console_login_failures
		SET locked_until = now() - interval '1 second', window_start_at = now() - interval '16 minutes' WHERE email = $1`, op.Email)
	require.NoError(t, err)
	_, err = s.SignIn(t.Context(), op.Email, op.Password)
	require.NoError(t, err, "the lockout is over")
}

// TestLockoutHoldsAgainstConcurrentGuesses: twelve wrong guesses at once (as
// from several pods) get at most five password checks; the rest are locked out.
func TestLockoutHoldsAgainstConcurrentGuesses(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	op := testdb.Operator(t, d.Pool, "", operators.Operator)
	s := operators.NewSessions(d.Pool, operators.Config{})
	errs := make([]error, 12)
	testkit.Together(len(errs), func(i int) { _, errs[i] = s.SignIn(t.Context(), op.Email, "guess") })
	var bad, locked int
	for _, err := range errs {
		switch {
		case errors.Is(err, operators.ErrBadCredentials):
			bad++
		case errors.Is(err, operators.ErrLockedOut):
			locked++
		default:
			t.Fatalf("unexpected %v", err)
		}
	}
	require.Equal(t, 5, bad, "exactly five guesses were checked")
	require.Equal(t, 7, locked)
	_, err := s.SignIn(t.Context(), op.Email, op.Password)
	require.ErrorIs(t, err, operators.ErrLockedOut)
}
