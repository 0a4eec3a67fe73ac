package testenv

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Reply is an HTTP answer, its body read whole.
type Reply struct {
	Code   int
	Body   string
	Header http.Header
}

// Send sends req with client and reads the whole answer; a request that gets no answer, or
// whose body cannot be read, fails tb.
func Send(tb testing.TB, client *http.Client, req *http.Request) Reply {
	tb.Helper()
	res, err := client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading the body: %v", req.Method, req.URL.Path, err)
	}
	return Reply{Code: res.StatusCode, Body: string(b), Header: res.Header}
}

// Cookie is the cookie of that name among cookies (a response's Cookies(), a jar's), nil if
// there is none; the last one wins, as in a browser.
func Cookie(cookies []*http.Cookie, name string) *http.Cookie {
	var found *http.Cookie
	for _, c := range cookies {
		if c.Name == name {
			found = c
		}
	}
	return found
}

// APIRequest is a request to url as an API client sends it: the body, the bearer token (none for
// ""), a JSON content type when there is a body, and then header's fields, which may replace
// any of those.
func APIRequest(tb testing.TB, method, url, token, body string, header map[string]string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req
}
