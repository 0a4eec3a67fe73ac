// Package sandbox gives tests the simulator's sandbox keys. It stands apart from testenv
// because simulate's own tests import testenv.
package sandbox

import (
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
