package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/paygw/paygw/webhook"
)

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

// FuzzVerify feeds Verify arbitrary headers and bodies: it must never panic, must return one of
// the package's errors, and must accept only what Sign produced for exactly that id, time and body.
func FuzzVerify(f *testing.F) {
	secret := webhook.MustParseSecret(vectorSecret)
	f.Add(vectorID, "1614265330", vectorSignature, []byte(vectorBody))
	f.Add("evt_1", "1614265330", "v1,"+vectorSignature+" v1a,abc", []byte("{}"))
	f.Add("", "", "", []byte(nil))
	f.Add("a.b", "-1", "v1,,,", []byte("x"))
	f.Add("id", "999999999999999999999", "v1,====", []byte("x"))
	now := time.Unix(1614265330, 0)
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		err := webhook.Verify(body, h, []string{vectorSecret}, now)
		if err != nil {
			for _, known := range []error{webhook.ErrMissingHeaders, webhook.ErrBadID, webhook.ErrBadTimestamp, webhook.ErrTooOld, webhook.ErrTooNew, webhook.ErrNoMatchingSignature} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("unexpected error %v", err)
		}
		// Accepted: the timestamp is canonical and one of the signatures is ours over exactly
		// these inputs.
		parsed := h.Get("webhook-timestamp")
		unix, err := strconv.ParseInt(parsed, 10, 64)
		if err != nil || strconv.FormatInt(unix, 10) != parsed {
			t.Fatalf("accepted timestamp %q", parsed)
		}
		want := webhook.Sign(h.Get("webhook-id"), time.Unix(unix, 0), body, secret)
		found := false
		for _, s := range splitSpaces(h.Get("webhook-signature")) {
			found = found || s == want
		}
		if !found {
			t.Fatalf("accepted %q without our signature %q", sig, want)
		}
	})
}

func splitSpaces(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ' ' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// FuzzParseSecret: a config value must never panic the parser, and whatever it accepts signs.
func FuzzParseSecret(f *testing.F) {
	f.Add(vectorSecret)
	f.Add("whsec_")
	f.Add("whsec_====")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := webhook.ParseSecret(s)
		if err != nil {
			if !errors.Is(err, webhook.ErrBadSecret) {
				t.Fatalf("error %v does not wrap ErrBadSecret", err)
			}
			return
		}
		if p.IsZero() || webhook.Sign("evt_1", time.Unix(1, 0), nil, p) == "" {
			t.Fatal("an accepted secret does not sign")
		}
	})
}
