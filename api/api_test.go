package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/paygw/paygw/api"
)

// TestOpenAPIValid: the embedded document loads, validates as OpenAPI 3.0 and builds a router.
func TestOpenAPIValid(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Fatalf("openapi = %s, want 3.0.x", doc.OpenAPI)
	}
	if _, err := gorillamux.NewRouter(doc); err != nil {
		t.Fatal(err)
	}
}

// TestOpenAPIEveryReplyHasRequestId: every response of every operation declares X-Request-Id, as
// the server sends it on every reply.
func TestOpenAPIEveryReplyHasRequestId(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, res := range op.Responses.Map() {
				h := res.Value.Headers["X-Request-Id"]
				if h == nil || !h.Value.Required {
					t.Errorf("%s %s %s: no required X-Request-Id header", method, path, code)
				}
			}
		}
	}
}
