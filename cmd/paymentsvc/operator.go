package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/acme/paymentsvc/internal/app"
	"github.com/acme/paymentsvc/internal/operators"
)

const operatorUsage = "usage: paymentsvc operator create --email E --role viewer|operator|admin\n       paymentsvc operator disable --email E"

// operator runs `operator create` (prints the new operator with its
// password, shown once) or `operator disable`. Bad usage (no --email,
// another role) exits 2 before the database is touched.
func operator(ctx context.Context, databaseURL string, migrate bool, sub, email, role string, stdout, stderr io.Writer, log *slog.Logger) int {
	if strings.TrimSpace(email) == "" {
		fmt.Fprintf(stderr, "operator %s: --email is required\n%s\n", sub, operatorUsage)
		return 2
	}
	r, err := operators.ParseRole(role)
	if sub == "create" && err != nil {
		fmt.Fprintf(stderr, "operator create: --role must be viewer, operator or admin, not %q\n", role)
		return 2
	}
	pool, err := app.OpenDB(ctx, databaseURL, app.Options{CreateDatabase: true, Migrate: migrate}, log)
	if err != nil {
		log.Error("operator "+sub+" failed", "err", err)
		return 1
	}
	defer pool.Close()
	if sub == "disable" {
		if err := operators.Disable(ctx, pool, email); err != nil {
			log.Error("operator disable failed", "email", operators.NormalizeEmail(email), "err", err)
			return 1
		}
		log.Info("operator disabled: its sessions ended", "email", operators.NormalizeEmail(email))
		return 0
	}
	c, err := operators.Create(ctx, pool, email, r)
	if err != nil {
		log.Error("operator create failed", "email", operators.NormalizeEmail(email), "err", err)
		if errors.Is(err, operators.ErrInvalid) {
			return 2
		}
		return 1
	}
	_ = json.NewEncoder(stdout).Encode(c)
	return 0
}
