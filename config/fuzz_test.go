package config

import (
	"os"
	"testing"
)

// FuzzLoad feeds arbitrary YAML to Load: it never panics, a refusal is a non-empty error with no
// config, and a config it accepts passes Validate again and names somewhere to reach Redis.
func FuzzLoad(f *testing.F) {
	shipped, err := os.ReadFile("paygw.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(shipped)
	f.Add([]byte("redis:\n  mode: cluster\n  addrs: [\"127.0.0.1:7101\", \"127.0.0.1:7102\"]\n"))
	f.Add([]byte("redis:\n  mode: sentinel\n  addrs: [\"127.0.0.1:26379\"]\n  master_name: paygw\n"))
	f.Add([]byte("redis:\n  mode: sentinel\n  addrs: [\"127.0.0.1:26379\"]\n"))
	f.Add([]byte("idempotency:\n  enabled: \"\"\n  redis_ttl: -1s\n"))
	f.Add([]byte("mysql: [unclosed\n"))
	f.Add([]byte("webhooks:\n  endpoints:\n    - {name: a, url: \"http://127.0.0.1:1/\", secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw], events: [order.paid]}\n  retry_schedule: [1s]\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := Load(writeConfig(t, string(body)), nil)
		if err != nil {
			if c != nil || err.Error() == "" {
				t.Fatalf("Load refused with config %v and error %q", c, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load accepted a config that Validate refuses: %v", err)
		}
		if len(c.Redis.Endpoints()) == 0 {
			t.Fatal("Load accepted a config with no Redis address")
		}
	})
}
