package guard

// RetryInterval lets the external tests step the clock to the edge of the skip interval.
const RetryInterval = retryInterval
