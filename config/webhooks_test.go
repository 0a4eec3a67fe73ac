package config

import (
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"

	"github.com/paygw/paygw/webhook"
)

func TestWebhooksLoad(t *testing.T) {
	a, b, c := testenv.WebhookSecret(t), testenv.WebhookSecret(t), testenv.WebhookSecret(t)
	cfg, err := Load(writeConfig(t, `
webhooks:
  endpoints:
    - {name: fulfil, url: "http://127.0.0.1:8097/webhooks", secret: `+a+`, events: [order.paid, order.refunded]}
    - {name: books, url: "https://books.example.com/paygw", secrets: [`+b+`, `+c+`]}
  retry_schedule: [1s, 1m]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	eps := cfg.Webhooks.Endpoints
	if len(eps) != 2 || eps[0].Name != "fulfil" || eps[1].URL != "https://books.example.com/paygw" {
		t.Fatalf("endpoints %+v", eps)
	}
	if n0, n1 := len(eps[0].SigningSecrets()), len(eps[1].SigningSecrets()); n0 != 1 || n1 != 2 {
		t.Fatalf("signing secrets: %d and %d, want 1 and 2", n0, n1)
	}
	// The first of secrets signs first: the new one during a rotation.
	body, at := []byte("{}"), time.Unix(1_800_000_000, 0)
	if got, want := webhook.Sign("evt_1", at, body, eps[1].SigningSecrets()...), webhook.Sign("evt_1", at, body, webhook.MustParseSecret(b), webhook.MustParseSecret(c)); got != want {
		t.Fatalf("signing order: %s, want %s", got, want)
	}
	if !eps[0].Subscribes("order.paid") || eps[0].Subscribes("order.closed") || !eps[1].Subscribes("payment.anomaly") {
		t.Fatal("Subscribes: fulfil takes paid and refunded only, books every type")
	}
	if got := cfg.Webhooks.RetrySchedule; len(got) != 2 || got[0] != time.Second || got[1] != time.Minute {
		t.Fatalf("retry_schedule %v", got)
	}

	env, err := Load(writeConfig(t, "{}\n"), []string{"PAYGW_WEBHOOKS__RETRY_SCHEDULE=100ms,2s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := env.Webhooks.RetrySchedule; len(got) != 2 || got[0] != 100*time.Millisecond || got[1] != 2*time.Second {
		t.Fatalf("retry_schedule from the environment: %v", got)
	}
}

func TestWebhooksRefused(t *testing.T) {
	good := testenv.WebhookSecret(t)
	short := "whsec_" + strings.Repeat("QUJD", 5) // 15 bytes
	tests := map[string]struct {
		yaml string
		want []string
	}{
		"no secret": {`{name: a, url: "http://127.0.0.1:1/"}`, []string{"webhooks.endpoints[0].secret", "or secrets must be set"}},
		"both":      {`{name: a, url: "http://127.0.0.1:1/", secret: ` + good + `, secrets: [` + good + `]}`, []string{"webhooks.endpoints[0].secret", "exclusive"}},
		"short":     {`{name: a, url: "http://127.0.0.1:1/", secret: ` + short + `}`, []string{"webhooks.endpoints[0].secret", "decodes to 15 bytes"}},
		"no prefix": {`{name: a, url: "http://127.0.0.1:1/", secret: ` + strings.TrimPrefix(good, "whsec_") + `}`, []string{"webhooks.endpoints[0].secret", "must start with whsec_"}},
		"one of the secrets bad, one twice": {`{name: a, url: "http://127.0.0.1:1/", secrets: [` + good + `, ` + short + `, ` + good + `]}`,
			[]string{"webhooks.endpoints[0].secrets[1]", "webhooks.endpoints[0].secrets[2]", "listed twice"}},
		"bad url":        {`{name: a, url: "ftp://x/", secret: ` + good + `}`, []string{"webhooks.endpoints[0].url", "http or https"}},
		"url with creds": {`{name: a, url: "https://u:Hunter2Secret@x/", secret: ` + good + `}`, []string{"webhooks.endpoints[0].url", "credentials"}},
		"bad name":       {`{name: "Not OK", url: "http://127.0.0.1:1/", secret: ` + good + `}`, []string{"webhooks.endpoints[0].name"}},
		"unknown event":  {`{name: a, url: "http://127.0.0.1:1/", secret: ` + good + `, events: [order.paid, order.shipped]}`, []string{"webhooks.endpoints[0].events[1]", "order.shipped"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Load(writeConfig(t, "webhooks:\n  endpoints:\n    - "+tc.yaml+"\n"), nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			for _, h := range []string{good[6:], short[6:], "Hunter2Secret"} {
				if strings.Contains(err.Error(), h) {
					t.Errorf("error %q reveals a secret", err)
				}
			}
		})
	}
	for name, yaml := range map[string]string{
		"twice the same name":                "webhooks:\n  endpoints:\n    - {name: a, url: \"http://127.0.0.1:1/\", secret: " + good + "}\n    - {name: a, url: \"http://127.0.0.1:2/\", secret: " + good + "}\n",
		"zero retry wait":                    "webhooks: {retry_schedule: [5s, 0s]}\n",
		"retry wait of a year":               "webhooks: {retry_schedule: [8760h]}\n",
		"retention under twice the schedule": "events: {retention: 100h}\nwebhooks: {retry_schedule: [24h, 24h, 24h]}\n",
	} {
		if _, err := Load(writeConfig(t, yaml), nil); err == nil || !strings.Contains(err.Error(), "webhooks.") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestWebhooksMasked(t *testing.T) {
	a, b, c := testenv.WebhookSecret(t), testenv.WebhookSecret(t), testenv.WebhookSecret(t)
	cfg, err := Load(writeConfig(t, `
webhooks:
  endpoints:
    - {name: one, url: "http://127.0.0.1:8097/webhooks", secret: `+a+`}
    - {name: two, url: "https://erp.example/hooks/T0k3n?key=k3y", secrets: [`+b+`, `+c+`]}
    - {name: three, url: "http://127.0.0.1:8099", secret: `+a+`}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.Masked()
	for _, s := range []string{a[6:], b[6:], c[6:], "T0k3n", "k3y"} {
		if strings.Contains(out, s) {
			t.Fatalf("Masked() reveals a webhook secret: %s", out)
		}
	}
	for _, want := range []string{`"secrets":["***","***"]`, `"url":"http://127.0.0.1:8097/***"`, `"url":"https://erp.example/***"`, `"url":"http://127.0.0.1:8099"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("Masked() lacks %s: %s", want, out)
		}
	}
	if cfg.Webhooks.Endpoints[0].Secret != a || cfg.Webhooks.Endpoints[1].Secrets[1] != c {
		t.Fatal("Masked() changed the live config")
	}
}

// An endpoint may subscribe to every type the outbox writes, reconciliation.reopened included.
func TestWebhooksTakeEveryEventType(t *testing.T) {
	for _, typ := range payment.EventTypes {
		cfg, err := Load(writeConfig(t, `
webhooks:
  endpoints:
    - {name: finance, url: "https://books.example.com/paygw", secret: `+testenv.WebhookSecret(t)+`, events: [`+typ+`]}
`), nil)
		if err != nil || !cfg.Webhooks.Endpoints[0].Subscribes(typ) {
			t.Fatalf("events: [%s]: %v", typ, err)
		}
	}
}
