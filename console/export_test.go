package console

import "time"

// SetNow sets the console's clock, for the tests of session expiry.
func SetNow(cs *Console, now func() time.Time) { cs.now = now }
