package stripe

import "github.com/paygw/paygw/internal/testenv"

// The keys these tests configure, registered so that the scan after `make test` proves no log
// line of the run shows one.
func init() {
	for _, s := range []string{stripeTestSecret, stripeNewSecret} {
		if err := testenv.RegisterSecret(s); err != nil {
			panic(err)
		}
	}
}
