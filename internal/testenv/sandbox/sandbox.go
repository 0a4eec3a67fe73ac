// Package sandbox gives tests the simulator's sandbox keys. It stands apart from testenv
// because simulate's own tests import testenv.
package sandbox

import (
	"bytes"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/simulate"
)

// Keys writes fresh sandbox keys and configuration (simulate.WriteKeys) into a directory of the
// test's own and registers every secret of them (testenv.Secret); it returns the directory and
// the manifest.
func Keys(tb testing.TB) (string, simulate.Manifest) {
	tb.Helper()
	dir := tb.TempDir()
	man, err := simulate.WriteKeys(dir, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range []string{man.WeChatPay.APIv3Key, man.Stripe.WebhookSecret, man.Stripe.APIKey, man.UnionPay.MerchantSignCertPassword} {
		testenv.Secret(tb, s)
	}
	return dir, man
}

// Sandbox is fresh sandbox keys and a fake channel that knows them.
type Sandbox struct {
	Dir      string            // the keys' directory
	Manifest simulate.Manifest // what Keys wrote
	Fake     *simulate.Fake    // the fake channel, notifying no one
	Config   []byte            // the channels: block trusting the keys, its API addresses on the fake
}

// WithFake is Keys, and a fake channel serving on a test server of its own.
func WithFake(tb testing.TB) Sandbox {
	tb.Helper()
	dir, man := Keys(tb)
	fake, err := simulate.NewFake(dir, "")
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(fake.Handler())
	tb.Cleanup(srv.Close)
	cfg, err := os.ReadFile(man.ConfigPath)
	if err != nil {
		tb.Fatal(err)
	}
	// The block WriteKeys wrote sends the API calls to simulate.FakeAddr; this fake is elsewhere.
	cfg = bytes.ReplaceAll(cfg, []byte("http://"+simulate.FakeAddr), []byte(srv.URL))
	return Sandbox{Dir: dir, Manifest: man, Fake: fake, Config: cfg}
}
