// Package migrations embeds the goose SQL migrations so that every binary
// carries its own schema.
package migrations

import "embed"

// FS holds the *.sql migrations, applied in file-name order.
//
//go:embed *.sql
var FS embed.FS
