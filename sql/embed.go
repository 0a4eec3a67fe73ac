// Package migrations embeds paygw's numbered goose migrations (the *.sql files beside it) so the
// binary can migrate a database with no files on disk.
package migrations

import "embed"

// FS holds every migration; goose reads it with the dialect "mysql".
//
//go:embed *.sql
var FS embed.FS
