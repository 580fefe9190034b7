package db

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactHidesEveryPassword(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable": "postgres://postgres@127.0.0.1:5432/payments?sslmode=disable",
		"postgres://u:s3cret@h:5432/db?sslmode=disable":               "postgres://u:***@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=s3cret&sslmode=disable":           "postgres://u@h/db?password=***&sslmode=disable",
		"postgres://u:s3cret@h/db?password=s3cret":                    "postgres://u:***@h/db?password=***",
		"host=h user=u password=s3cret dbname=db":                     "(redacted connection string)",
	} {
		got := Redact(in)
		require.Equal(t, want, got, "Redact(%q)", in)
		require.NotContains(t, got, "s3cret")
	}
}
