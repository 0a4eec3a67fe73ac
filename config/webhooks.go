package config

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/webhook"
)

// Webhooks are the merchant's endpoints paygw pushes its events to (Standard Webhooks).
type Webhooks struct {
	Endpoints []Endpoint `koanf:"endpoints"`
	// RetrySchedule is the wait before each retry after the first attempt, which is at once;
	// after the last one fails the delivery is marked failed. Default: the spec's example.
	RetrySchedule []time.Duration `koanf:"retry_schedule"`
}

// Endpoint is one receiver. Secret, or Secrets ([new, old]) during a rotation: each delivery is
// signed with every one of them.
type Endpoint struct {
	Name    string   `koanf:"name"`
	URL     string   `koanf:"url"`
	Secret  string   `koanf:"secret"`
	Secrets []string `koanf:"secrets"`
	Events  []string `koanf:"events"` // empty: every type
}

// EventTypes are the event types an endpoint may subscribe to: the outbox's.
var EventTypes = payment.EventTypes

// DefaultRetrySchedule is webhooks.retry_schedule's default, the Standard Webhooks
// specification's example schedule up to 10 hours.
var DefaultRetrySchedule = []string{"5s", "5m", "30m", "2h", "5h", "10h", "10h"}

// Retry schedule bounds: a day's worth of waits, none longer than a week.
const (
	maxRetries    = 30
	maxRetryDelay = 7 * 24 * time.Hour
)

// SigningSecrets are the endpoint's secrets, parsed, newest first; Validate has checked them.
func (e Endpoint) SigningSecrets() []webhook.Secret {
	raw := e.Secrets
	if e.Secret != "" {
		raw = []string{e.Secret}
	}
	out := make([]webhook.Secret, 0, len(raw))
	for _, s := range raw {
		if p, err := webhook.ParseSecret(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// scheduleSpan is the time from an event's first attempt to its last retry.
func (w Webhooks) scheduleSpan() time.Duration {
	var total time.Duration
	for _, d := range w.RetrySchedule {
		total += d
	}
	return total
}

// maskURL shows an endpoint's scheme and host only: a path or query often holds a token.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "***"
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return u.Scheme + "://" + u.Host + "/***"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// Subscribes reports whether the endpoint takes events of type typ.
func (e Endpoint) Subscribes(typ string) bool {
	return len(e.Events) == 0 || slices.Contains(e.Events, typ)
}

// validateWebhooks: names unique, URLs http(s) without credentials, secrets well formed.
func (c *Config) validateWebhooks(bad func(key, format string, args ...any)) {
	names := map[string]bool{}
	for i, e := range c.Webhooks.Endpoints {
		key := fmt.Sprintf("webhooks.endpoints[%d]", i)
		if !tokenName.MatchString(e.Name) {
			bad(key+".name", "must be 1-32 characters of [a-z0-9_-], got %q", e.Name)
		} else if names[e.Name] {
			bad(key+".name", "%q is used twice", e.Name)
		}
		names[e.Name] = true
		if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(key+".url", "must be an http or https URL") // not echoed: it may hold credentials
		} else if u.User != nil {
			bad(key+".url", "must not carry credentials (the signature is the credential)")
		}
		validateEndpointSecrets(key, e, bad)
		for j, typ := range e.Events {
			if !slices.Contains(EventTypes, typ) {
				bad(fmt.Sprintf("%s.events[%d]", key, j), "must be one of %s, got %q", strings.Join(EventTypes, ", "), typ)
			}
		}
	}
	if len(c.Webhooks.RetrySchedule) > maxRetries {
		bad("webhooks.retry_schedule", "must list at most %d waits, got %d", maxRetries, len(c.Webhooks.RetrySchedule))
	}
	for i, d := range c.Webhooks.RetrySchedule {
		if d <= 0 || d > maxRetryDelay {
			bad(fmt.Sprintf("webhooks.retry_schedule[%d]", i), "must be a positive duration of at most %s, got %s", maxRetryDelay, d)
		}
	}
}

// validateEndpointSecrets: exactly one of secret and secrets, each whsec_ + base64 of 24 to 64
// bytes, none twice. A message never quotes a secret.
func validateEndpointSecrets(key string, e Endpoint, bad func(key, format string, args ...any)) {
	switch {
	case e.Secret == "" && len(e.Secrets) == 0:
		bad(key+".secret", "or secrets must be set")
		return
	case e.Secret != "" && len(e.Secrets) > 0:
		bad(key+".secret", "and secrets are exclusive: secrets [new, old] replaces secret during a rotation")
		return
	}
	if e.Secret != "" {
		if _, err := webhook.ParseSecret(e.Secret); err != nil {
			bad(key+".secret", "%v", err)
		}
		return
	}
	seen := map[string]bool{}
	for j, s := range e.Secrets {
		k := fmt.Sprintf("%s.secrets[%d]", key, j)
		if _, err := webhook.ParseSecret(s); err != nil {
			bad(k, "%v", err)
		} else if seen[s] {
			bad(k, "is listed twice")
		}
		seen[s] = true
	}
}

// maskWebhooks hides every endpoint secret, and the path and query of every URL, in m, a copy of the config whose slices are still
// shared with the live one.
func maskWebhooks(m *Config) {
	eps := make([]Endpoint, len(m.Webhooks.Endpoints))
	for i, e := range m.Webhooks.Endpoints {
		if e.Secret != "" {
			e.Secret = "***"
		}
		masked := make([]string, len(e.Secrets))
		for j := range masked {
			masked[j] = "***"
		}
		e.Secrets = masked
		e.URL = maskURL(e.URL)
		eps[i] = e
	}
	m.Webhooks.Endpoints = eps
}

// stringToDurations reads a list of durations from the environment, "5s,5m" (the shared
// StringToSliceHookFunc splits only into []string).
func stringToDurations(from, to reflect.Type, data any) (any, error) {
	if s, ok := data.(string); ok && from.Kind() == reflect.String && to == reflect.TypeOf([]time.Duration(nil)) {
		if s == "" {
			return []string{}, nil
		}
		return strings.Split(s, ","), nil
	}
	return data, nil
}
