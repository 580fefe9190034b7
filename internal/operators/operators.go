package operators

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
)

// Role is what an operator may do in the console.
type Role string

// The roles, each allowed what the one before may do, and more.
const (
	// Viewer sees everything and changes nothing.
	Viewer Role = "viewer"
	// Operator may also sync, refund, resolve anomalies (and, as they
	// land, capture, void and retry merchant deliveries).
	Operator Role = "operator"
	// Admin may also create tenants and see the operators.
	Admin Role = "admin"
)

// rank orders the roles.
var rank = map[Role]int{Viewer: 1, Operator: 2, Admin: 3}

// ParseRole returns the role called s; ErrInvalid for anything else.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if _, ok := rank[r]; !ok {
		return "", fmt.Errorf("%w: role must be viewer, operator or admin, not %q", ErrInvalid, s)
	}
	return r, nil
}

// AtLeast reports whether r may do what min may.
func (r Role) AtLeast(min Role) bool { return rank[r] >= rank[min] && rank[min] > 0 }

// Errors of the package.
var (
	// ErrInvalid is an email or role that cannot be an operator's.
	ErrInvalid = errors.New("invalid operator")
	// ErrExists is an email that already has an operator.
	ErrExists = errors.New("an operator with this email exists")
	// ErrNotFound is an email that has no operator.
	ErrNotFound = errors.New("no operator with this email")
)

// Account is an operator as the console shows it.
type Account struct {
	ID         string
	Email      string
	Role       Role
	CreatedAt  time.Time
	DisabledAt *time.Time
}

// Created is a new operator with its password, shown once.
type Created struct {
	Email    string `json:"email"`
	Role     Role   `json:"role"`
	Password string `json:"password"`
}

// NormalizeEmail is the form an email is stored and counted under.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// validEmail is a plausible address: one @ with something on both sides, no
// spaces or control characters, at most 254 bytes.
func validEmail(email string) bool {
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") || len(email) > 254 {
		return false
	}
	for _, c := range email {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// Create makes an operator with a generated password (26 characters of
// crypto/rand's base32, 130 bits) and returns it, the only time it is shown.
func Create(ctx context.Context, q db.DBTX, email string, role Role) (Created, error) {
	email = NormalizeEmail(email)
	if !validEmail(email) {
		return Created{}, fmt.Errorf("%w: %q is not an email address", ErrInvalid, email)
	}
	if _, err := ParseRole(string(role)); err != nil {
		return Created{}, err
	}
	password := rand.Text()
	hash, err := hashPassword(ctx, password)
	if err != nil {
		return Created{}, err
	}
	_, err = db.Q.OperatorInsert(ctx, q, db.OperatorInsertParams{
		ID: ids.New("op_", 12), Email: email, Role: string(role), PasswordHash: hash,
	})
	if err = db.Translate(err); errors.Is(err, db.ErrConflict) {
		return Created{}, fmt.Errorf("%w: %s", ErrExists, email)
	} else if err != nil {
		return Created{}, err
	}
	return Created{Email: email, Role: role, Password: password}, nil
}

// Disable disables the operator and ends its sessions at once; its sign-ins
// fail from then on. Disabling a disabled operator changes nothing.
func Disable(ctx context.Context, q db.DBTX, email string) error {
	_, err := db.Q.OperatorDisable(ctx, q, NormalizeEmail(email))
	if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, NormalizeEmail(email))
	}
	return err
}

// List returns every operator, by email.
func List(ctx context.Context, q db.DBTX) ([]Account, error) {
	rows, err := db.Q.OperatorList(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]Account, len(rows))
	for i, r := range rows {
		out[i] = account(r)
	}
	return out, nil
}
