package main

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/paygw/paygw/config"
)

// webhookDialTimeout bounds doctor's reachability check of one endpoint.
const webhookDialTimeout = 3 * time.Second

// doctorWebhooks: each endpoint's secrets are well formed (Load refused malformed ones; this
// line says how many sign), it answers a TCP connection, and plain http to a host that is not
// this machine is a warning: the events, amounts and user ids travel unencrypted.
func doctorWebhooks(ctx context.Context, cfg *config.Config, c *checklist) {
	if len(cfg.Webhooks.Endpoints) == 0 {
		c.skip("webhooks", "no webhooks.endpoints configured")
		return
	}
	for _, e := range cfg.Webhooks.Endpoints {
		name := "webhook " + e.Name
		n := len(e.Secrets)
		if e.Secret != "" {
			n = 1
		}
		if got := len(e.SigningSecrets()); got != n || n == 0 {
			c.fail(name, "%d of %d secret(s) are whsec_ + base64 of 24 to 64 bytes", got, n)
			continue
		}
		u, err := url.Parse(e.URL)
		if err != nil {
			c.fail(name, "the url does not parse")
			continue
		}
		events := "every event type"
		if len(e.Events) > 0 {
			events = strings.Join(e.Events, ", ")
		}
		if u.Scheme == "http" && !isLoopback(u.Hostname()) {
			c.warn(name, "plain http to %s, which is not this machine: use https (the signature proves the sender but hides nothing)", u.Host)
		}
		if err := dialEndpoint(ctx, u); err != nil {
			c.fail(name, "%s is not reachable: %v", u.Host, err)
			continue
		}
		c.ok(name, "%s://%s reachable, %d secret(s) well formed, %s", u.Scheme, u.Host, n, events)
	}
}

// isLoopback: localhost, or a loopback IP literal.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dialEndpoint opens (and closes) a TCP connection to the endpoint's host and port.
func dialEndpoint(ctx context.Context, u *url.URL) error {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	d := net.Dialer{Timeout: webhookDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return err
	}
	return conn.Close()
}
