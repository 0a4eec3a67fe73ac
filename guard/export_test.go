package guard

import "context"

// RetryInterval lets the external tests step the clock to the edge of the skip interval.
const RetryInterval = retryInterval

// Redirected and Failed let the external tests classify a real cluster's errors.
var Redirected = redirected

func (g *Guard) Failed(ctx context.Context, err error) error { return g.failed(ctx, err) }

func (g *Guard) Skipping() bool { return g.skipping() }
