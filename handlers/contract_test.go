package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/api"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// contract is api/openapi.yaml and its router, loaded once for the test binary.
var contract = sync.OnceValues(func() (*contractDoc, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &contractDoc{doc: doc, router: router}, nil
})

type contractDoc struct {
	doc    *openapi3.T
	router routers.Router
}

// contractOptions: every status a route answers must be in the contract; the bearer scheme is
// checked for its shape (the server checks the token itself).
var contractOptions = &openapi3filter.Options{
	IncludeResponseStatus: true,
	MultiError:            true,
	AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		if in.SecuritySchemeName != "bearer" {
			return fmt.Errorf("unknown security scheme %s", in.SecuritySchemeName)
		}
		if v := in.RequestValidationInput.Request.Header.Values("Authorization"); len(v) != 1 || len(v[0]) < 7 || !strings.EqualFold(v[0][:7], "Bearer ") {
			return errors.New("no bearer token")
		}
		return nil
	},
}

// contractTransport checks every exchange it carries against api/openapi.yaml and fails t on a
// mismatch: the response always; the request too unless the transport carries deliberately
// malformed requests (requests false). A request the contract refuses is fine when paygw refused
// it too (4xx); paygw accepting what its contract refuses is a mismatch.
type contractTransport struct {
	t        *testing.T
	requests bool
}

func (ct contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		req.ContentLength = int64(len(reqBody))
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resBody, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(resBody))
	if err := ct.check(req, reqBody, res, resBody); err != nil {
		ct.t.Errorf("contract: %s %s -> %d %q: %v", req.Method, req.URL.RequestURI(), res.StatusCode, excerpt(resBody), err)
	}
	return res, nil
}

func (ct contractTransport) check(req *http.Request, reqBody []byte, res *http.Response, resBody []byte) error {
	c, err := contract()
	if err != nil {
		return err
	}
	// A copy of the request as the server saw it, for the validators to read.
	in := req.Clone(context.Background())
	in.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := c.router.FindRoute(in)
	if err != nil {
		// Not a route of the contract: only echo's own "no such route" answers may come back.
		if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed {
			return nil
		}
		return fmt.Errorf("no route in the contract (%v), yet answered %d", err, res.StatusCode)
	}
	reqIn := &openapi3filter.RequestValidationInput{Request: in, PathParams: params, Route: route, Options: contractOptions}
	if ct.requests {
		if err := openapi3filter.ValidateRequest(context.Background(), reqIn); err != nil && (res.StatusCode < 400 || res.StatusCode >= 500) {
			return fmt.Errorf("request refused by the contract, yet answered %d: %v", res.StatusCode, err)
		}
	}
	resIn := &openapi3filter.ResponseValidationInput{RequestValidationInput: reqIn, Status: res.StatusCode, Header: res.Header,
		Options: contractOptions}
	resIn.SetBodyBytes(resBody)
	if err := openapi3filter.ValidateResponse(context.Background(), resIn); err != nil {
		return fmt.Errorf("response refused by the contract: %v", err)
	}
	return nil
}

func excerpt(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// contractClient is an HTTP client whose every exchange is checked against the contract.
func contractClient(t *testing.T, requests bool) *http.Client {
	return &http.Client{Transport: contractTransport{t: t, requests: requests}}
}

// TestContractProblemTypes: the problem types the contract lists are exactly those problemOf
// answers.
func TestContractProblemTypes(t *testing.T) {
	c, err := contract()
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, v := range c.doc.Components.Schemas["Problem"].Value.Properties["type"].Value.Enum {
		listed = append(listed, v.(string))
	}
	seen := map[string]bool{}
	for _, err := range []error{errTooLarge, errBadBody, orders.ErrBadJSON, orders.ErrInvalid, errNoKey, errBadKey, errBadStock,
		errBadAttempt, errBadQuery, errUnauthorized, orders.ErrUnknownSKU, payment.ErrNotFound, payment.ErrOutOfStock,
		payment.ErrInFlight, &orders.Done{}, errAlreadyResolved, orders.ErrNotPayable, orders.ErrKeyReused,
		orders.ErrMerchantOrderIDTaken, channels.ErrCurrency, &forbiddenError{need: access.Read}, errAlreadySignedOff,
		fmt.Errorf("%w: %w", errOpenDiscrepancies, &repository.OpenError{Count: 1}), errors.New("internal")} {
		seen[problemOf(err).Type] = true
	}
	var answered []string
	for typ := range seen {
		answered = append(answered, typ)
	}
	sort.Strings(listed)
	sort.Strings(answered)
	if strings.Join(listed, " ") != strings.Join(answered, " ") {
		t.Fatalf("contract lists\n%v\nproblemOf answers\n%v", listed, answered)
	}
}

// TestContractCatchesDrift: the checker refuses what the contract does not describe, so a green
// suite means the exchanges matched, not that nothing was checked.
func TestContractCatchesDrift(t *testing.T) {
	ct := contractTransport{t: t, requests: true}
	rid := http.Header{"X-Request-Id": {"abc"}}
	with := func(h http.Header, kv ...string) http.Header {
		h = h.Clone()
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	cases := []struct {
		name           string
		method, path   string
		reqHeader      http.Header
		reqBody        string
		status         int
		resHeader      http.Header
		resBody        string
		wantMismatched bool
	}{
		{"order as described", "GET", "/v1/orders/T1", http.Header{"Authorization": {"Bearer x"}}, "", 200,
			with(rid, "Content-Type", "application/json"),
			`{"trade_no":"T1","user_id":1,"sku":"A","num":1,"amount_fen":1,"currency":"CNY","status":"PAID","refunded_fen":0,"created_at":"2026-01-02T03:04:05Z"}`, false},
		{"order with a field too many", "GET", "/v1/orders/T1", http.Header{"Authorization": {"Bearer x"}}, "", 200,
			with(rid, "Content-Type", "application/json"),
			`{"trade_no":"T1","user_id":1,"sku":"A","num":1,"amount_fen":1,"currency":"CNY","status":"PAID","refunded_fen":0,"created_at":"2026-01-02T03:04:05Z","x":1}`, true},
		{"no X-Request-Id", "GET", "/healthz", nil, "", 200, http.Header{"Content-Type": {"application/json"}}, `{"status":"ok"}`, true},
		{"undocumented status", "GET", "/healthz", nil, "", 500, with(rid, "Content-Type", "application/json"), `{"status":"ok"}`, true},
		{"problem of another route's type", "GET", "/v1/orders/T1", http.Header{"Authorization": {"Bearer x"}}, "", 404,
			with(rid, "Content-Type", "application/problem+json"),
			`{"type":"urn:paygw:problem:unknown-sku","title":"unknown sku","status":404}`, true},
		{"problem as described", "GET", "/v1/orders/T1", http.Header{"Authorization": {"Bearer x"}}, "", 404,
			with(rid, "Content-Type", "application/problem+json"),
			`{"type":"urn:paygw:problem:not-found","title":"not found","status":404,"detail":"no such order"}`, false},
		{"alipay reply not in its words", "POST", "/notify/alipay", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "a=b", 400,
			with(rid, "Content-Type", "text/plain; charset=utf-8"), "FAIL", true},
		{"accepted what the contract refuses", "PUT", "/v1/stock/A", http.Header{"Authorization": {"Bearer x"}, "Content-Type": {"application/json"}},
			`{"num":-1,"price_fen":1}`, 200, with(rid, "Content-Type", "application/json"), `{"sku":"A","num":1,"price_fen":1}`, true},
		{"refused what the contract refuses", "PUT", "/v1/stock/A", http.Header{"Authorization": {"Bearer x"}, "Content-Type": {"application/json"}},
			`{"num":-1,"price_fen":1}`, 400, with(rid, "Content-Type", "application/problem+json"),
			`{"type":"urn:paygw:problem:invalid-request","title":"invalid request","status":400}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://paygw.test"+tc.path, strings.NewReader(tc.reqBody))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.reqHeader {
				req.Header[k] = v
			}
			res := &http.Response{StatusCode: tc.status, Header: tc.resHeader}
			err = ct.check(req, []byte(tc.reqBody), res, []byte(tc.resBody))
			if (err != nil) != tc.wantMismatched {
				t.Fatalf("check = %v, want mismatch %v", err, tc.wantMismatched)
			}
		})
	}
}

// TestServedContract: GET /v1/openapi.yaml serves the embedded document, behind the token like
// the rest of /v1.
func TestServedContract(t *testing.T) {
	h := newHarness(t, options{})
	r := h.do("GET", "/v1/openapi.yaml", testToken, nil, "")
	if r.code != http.StatusOK || r.body != string(api.OpenAPI) || r.header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /v1/openapi.yaml = %d %s, %d bytes; want 200 application/yaml, the embedded document", r.code, r.header.Get("Content-Type"), len(r.body))
	}
	if r := h.do("GET", "/v1/openapi.yaml", "", nil, ""); r.code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d, want 401", r.code)
	}
}
