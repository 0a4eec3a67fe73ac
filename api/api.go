// Package api holds paygw's HTTP contract: api/openapi.yaml, embedded so that the binary serves
// the very document its tests validated every request and response against.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml, as served at GET /v1/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
