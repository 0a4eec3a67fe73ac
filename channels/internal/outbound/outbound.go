// Package outbound is the HTTP plumbing the channels' clients share: a transport that reads each
// response whole and records it, so that the bytes an SDK verified are the bytes paygw parses and
// journals, and the check of a configured base URL.
package outbound

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// ResponseLimit bounds a query response read into memory; the answers are a few kB.
const ResponseLimit = 1 << 20

// Capture is what transport saw of one request's response.
type Capture struct {
	Status   int
	Header   http.Header
	Body     []byte
	Verified bool // set by a response validator that checked the signature over Body
}

type captureKey struct{}

// With returns ctx carrying c, for the transport to fill in.
func With(ctx context.Context, c *Capture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

// From is the Capture ctx carries, or nil.
func From(ctx context.Context) *Capture {
	c, _ := ctx.Value(captureKey{}).(*Capture)
	return c
}

// transport reads each response body whole (at most ResponseLimit bytes) before the
// SDK does, and records status, headers and body in the capture the request's context carries:
// the bytes an SDK verified are then the very bytes paygw parses and journals. With rewrite set,
// it sends the request to rewrite's scheme and host instead (for SDKs that hard-code the API host;
// the path and query are left alone).
type transport struct {
	base    http.RoundTripper
	rewrite *url.URL
}

// RoundTrip sends req and reads its response whole into the request's Capture.
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.rewrite != nil {
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host, req.Host = t.rewrite.Scheme, t.rewrite.Host, ""
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, ResponseLimit+1))
	_ = resp.Body.Close()
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the response: %w", err)
	case len(body) > ResponseLimit:
		return nil, fmt.Errorf("response longer than %d bytes", ResponseLimit)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if c := From(req.Context()); c != nil {
		c.Status, c.Header, c.Body = resp.StatusCode, resp.Header, body
	}
	return resp, nil
}

// Client is hc (timeout, redirects, jar) sending through a transport.
func Client(hc *http.Client, rewrite *url.URL) *http.Client {
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	c := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = transport{base: base, rewrite: rewrite}
	return &c
}

// CheckBaseURL accepts an absolute http(s) URL; withPath also admits a path (a gateway's
// /gateway.do), otherwise only scheme and host may be given.
func CheckBaseURL(s string, withPath bool) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return errors.New("empty")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil:
		return errors.New("not an absolute http(s) URL without credentials")
	case !withPath && (u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != ""):
		return errors.New("must be scheme and host only: the API paths are fixed, and signed as sent")
	}
	return nil
}
