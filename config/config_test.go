package config

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/access"
)

// writeConfig puts body into a fresh YAML file for this test and returns its path.
func writeConfig(tb testing.TB, body string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "paygw.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// wantDefaults is the configuration an empty file yields, spelled out rather than taken from
// defaults() so that a changed default is a visible decision.
func wantDefaults() Config {
	return Config{
		HTTP: HTTP{Addr: "127.0.0.1:8080", BodyLimitBytes: 1 << 20, ShutdownTimeout: 10 * time.Second},
		Log:  Log{Level: "info", Format: "json"},
		MySQL: MySQL{
			DSN:          "root@tcp(127.0.0.1:3306)/paygw?parseTime=true&loc=UTC",
			MaxOpenConns: 32,
			GroupLanes:   2,
		},
		Redis: Redis{Mode: "single"},
		Idempotency: Idempotency{
			Enabled:               true,
			KeyHeader:             "Idempotency-Key",
			RedisTTL:              30 * time.Second,
			DBTimeoutCleanSeconds: 600,
			ReturnOriginalResult:  true,
			Retention:             168 * time.Hour,
		},
		Journal: Journal{Retention: 9600 * time.Hour},
		Events:  Events{Retention: 720 * time.Hour},
		Console: Console{Enabled: true, SessionTTL: 8 * time.Hour},
		Channels: Channels{
			Alipay:    Alipay{GatewayURL: "https://openapi.alipay.com/gateway.do"},
			WeChatPay: WeChatPay{APIBaseURL: "https://api.mch.weixin.qq.com"},
			Stripe:    Stripe{Tolerance: 300 * time.Second, APIBaseURL: "https://api.stripe.com"},
			UnionPay:  UnionPay{SignerName: "中国银联股份有限公司", QueryURL: "https://gateway.95516.com/gateway/api/queryTrans.do"},
		},
		Reconcile: Reconcile{QueryInterval: time.Minute, QueryAfter: 10 * time.Minute, QueryMaxAge: 72 * time.Hour, QPS: 10,
			StripeTimezone: "UTC", LocalOnlyGrace: 48 * time.Hour, BillAt: "10:30"},
		Webhooks: Webhooks{RetrySchedule: []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute,
			2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}},
	}
}

const issueBlock = `idempotency:
  enabled: true
  key_header: Idempotency-Key
  redis_ttl: 30s
  db_timeout_clean_seconds: 600
  return_original_result: true
`

func TestLoad(t *testing.T) {
	tests := map[string]struct {
		yaml    string // written to a temp file; ignored when path is set
		path    string
		environ []string
		want    func(c *Config) // edits wantDefaults() into the expected result
	}{
		"empty file gives defaults": {
			yaml: "# nothing but a comment\n",
			want: func(c *Config) {},
		},
		"empty map gives defaults": {
			yaml: "{}\n",
			want: func(c *Config) {},
		},
		"shipped paygw.yaml": {
			path: "paygw.yaml",
			want: func(c *Config) {
				c.Redis.Addr = "127.0.0.1:6379"
				c.Channels.Alipay.AppID = "2021000000000000"
				c.Channels.WeChatPay.MchID, c.Channels.WeChatPay.AppID = "1900000001", "wx0000000000000000"
				c.Webhooks.Endpoints = []Endpoint{}
			},
		},
		"issue block loads unchanged": {
			yaml: issueBlock,
			want: func(c *Config) {},
		},
		"issue block with other values": {
			yaml: strings.NewReplacer("30s", "45s", "600", "120", "enabled: true", "enabled: false").Replace(issueBlock),
			want: func(c *Config) {
				c.Idempotency.Enabled = false
				c.Idempotency.RedisTTL = 45 * time.Second
				c.Idempotency.DBTimeoutCleanSeconds = 120
			},
		},
		"retention at the minimums": {
			yaml:    "idempotency: {retention: 72h}\njournal: {retention: 720h}\nevents: {retention: 72h}\n",
			environ: nil,
			want: func(c *Config) {
				c.Idempotency.Retention = 72 * time.Hour
				c.Journal.Retention = 720 * time.Hour
				c.Events.Retention = 72 * time.Hour
			},
		},
		"retention via env": {
			yaml:    "{}\n",
			environ: []string{"PAYGW_IDEMPOTENCY__RETENTION=336h", "PAYGW_JOURNAL__RETENTION=8760h", "PAYGW_EVENTS__RETENTION=2160h"},
			want: func(c *Config) {
				c.Idempotency.Retention = 336 * time.Hour
				c.Journal.Retention = 8760 * time.Hour
				c.Events.Retention = 2160 * time.Hour
			},
		},
		"file values": {
			yaml: `
http: {addr: ":9090", body_limit_bytes: 4096, shutdown_timeout: 3s}
log: {level: debug, format: console}
redis: {addr: "redis:6380", password: pw, db: 3}
auth:
  api_tokens:
    - {name: shop-a, token: 0123456789abcdef}
    - {name: shop_b, token: fedcba9876543210}
channels:
  alipay: {enabled: true, app_id: "2021", alipay_public_key_file: /keys/alipay.pem}
`,
			want: func(c *Config) {
				c.HTTP = HTTP{Addr: ":9090", BodyLimitBytes: 4096, ShutdownTimeout: 3 * time.Second}
				c.Log = Log{Level: "debug", Format: "console"}
				c.Redis = Redis{Addr: "redis:6380", Mode: "single", Password: "pw", DB: 3}
				c.Auth.APITokens = []APIToken{
					{Name: "shop-a", Token: "0123456789abcdef"},
					{Name: "shop_b", Token: "fedcba9876543210"},
				}
				c.Channels.Alipay = Alipay{GatewayURL: "https://openapi.alipay.com/gateway.do", Enabled: true, AppID: "2021", AlipayPublicKeyFile: "/keys/alipay.pem"}
			},
		},
		"env overrides file": {
			yaml: `
log: {level: debug}
mysql: {dsn: "root@tcp(file:3306)/fromfile"}
http: {body_limit_bytes: 4096}
idempotency: {redis_ttl: 10s}
`,
			environ: []string{
				"PAYGW_MYSQL__DSN=app:pw@tcp(db:3306)/fromenv?parseTime=true",
				"PAYGW_IDEMPOTENCY__REDIS_TTL=5s",
				"PAYGW_HTTP__BODY_LIMIT_BYTES=2048",
			},
			want: func(c *Config) {
				c.Log.Level = "debug" // from the file, not overridden
				c.MySQL.DSN = "app:pw@tcp(db:3306)/fromenv?parseTime=true"
				c.Idempotency.RedisTTL = 5 * time.Second
				c.HTTP.BodyLimitBytes = 2048
			},
		},
		"wechatpay appids: app_id and app_ids together": {
			yaml: `
channels:
  wechatpay:
    enabled: true
    mch_id: "1900000001"
    app_id: wxA
    app_ids: [wxB, wxA]
    api_v3_key: 0123456789abcdef0123456789abcdef
    platform_public_key_id: PUB_KEY_ID_1
    platform_public_key_file: /keys/wechat.pem
`,
			want: func(c *Config) {
				c.Channels.WeChatPay = WeChatPay{APIBaseURL: "https://api.mch.weixin.qq.com", Enabled: true, MchID: "1900000001", AppID: "wxA", AppIDs: []string{"wxB", "wxA"},
					APIv3Key: "0123456789abcdef0123456789abcdef", PlatformPublicKeyID: "PUB_KEY_ID_1", PlatformPublicKeyFile: "/keys/wechat.pem"}
			},
		},
		"wechatpay app_ids alone, from the environment": {
			yaml: "{}\n",
			environ: []string{
				"PAYGW_CHANNELS__WECHATPAY__ENABLED=true", "PAYGW_CHANNELS__WECHATPAY__MCH_ID=1900000001",
				"PAYGW_CHANNELS__WECHATPAY__APP_IDS=wxA,wxB", "PAYGW_CHANNELS__WECHATPAY__API_V3_KEY=0123456789abcdef0123456789abcdef",
				"PAYGW_CHANNELS__WECHATPAY__PLATFORM_PUBLIC_KEY_ID=PUB_KEY_ID_1", "PAYGW_CHANNELS__WECHATPAY__PLATFORM_PUBLIC_KEY_FILE=/k.pem",
			},
			want: func(c *Config) {
				c.Channels.WeChatPay = WeChatPay{APIBaseURL: "https://api.mch.weixin.qq.com", Enabled: true, MchID: "1900000001", AppIDs: []string{"wxA", "wxB"},
					APIv3Key: "0123456789abcdef0123456789abcdef", PlatformPublicKeyID: "PUB_KEY_ID_1", PlatformPublicKeyFile: "/k.pem"}
			},
		},
		"unionpay test environment signer": {
			yaml: `channels: {unionpay: {enabled: true, mer_id: "777", root_cert_file: /r.pem, intermediate_cert_file: /i.pem, signer_name: "00040000:SIGN"}}` + "\n",
			want: func(c *Config) {
				c.Channels.UnionPay = UnionPay{QueryURL: "https://gateway.95516.com/gateway/api/queryTrans.do", Enabled: true, MerID: "777", RootCertFile: "/r.pem", IntermediateCertFile: "/i.pem", SignerName: "00040000:SIGN"}
			},
		},
		"redis cluster": {
			yaml: "redis: {mode: cluster, addrs: [10.0.0.1:7001, 10.0.0.2:7001, 10.0.0.3:7001]}\n",
			want: func(c *Config) {
				c.Redis = Redis{Mode: "cluster", Addrs: []string{"10.0.0.1:7001", "10.0.0.2:7001", "10.0.0.3:7001"}}
			},
		},
		"redis sentinel from the environment": {
			yaml: "{}\n",
			environ: []string{
				"PAYGW_REDIS__MODE=sentinel",
				"PAYGW_REDIS__ADDRS=s1:26379,s2:26379",
				"PAYGW_REDIS__MASTER_NAME=paygw",
			},
			want: func(c *Config) {
				c.Redis = Redis{Mode: "sentinel", Addrs: []string{"s1:26379", "s2:26379"}, MasterName: "paygw"}
			},
		},
		"redis single from a one-item addrs": {
			yaml: "redis: {addrs: [redis:6380]}\n",
			want: func(c *Config) { c.Redis = Redis{Mode: "single", Addrs: []string{"redis:6380"}} },
		},
		"env without __ and foreign env are not keys": {
			yaml: "{}\n",
			environ: []string{
				"PAYGW_CONFIG=/etc/paygw.yaml",
				"PAYGW_TEST_MYSQL_DSN=root@tcp(127.0.0.1:3306)/",
				"PAYGW_TEST_REDIS_ADDR=127.0.0.1:6379",
				"HOME=/root",
				"MYSQL__DSN=not-ours",
				"garbage-without-equals",
			},
			want: func(c *Config) {},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = writeConfig(t, tc.yaml)
			}
			got, err := Load(path, tc.environ)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := wantDefaults()
			tc.want(&want)
			if len(got.Auth.APITokens) == 0 {
				got.Auth.APITokens = nil // `api_tokens: []` and no key at all mean the same
			}
			if len(got.Channels.Stripe.WebhookSecrets) == 0 {
				got.Channels.Stripe.WebhookSecrets = nil
			}
			if len(got.Channels.WeChatPay.PlatformCertificateFiles) == 0 {
				got.Channels.WeChatPay.PlatformCertificateFiles = nil
			}
			if len(got.Channels.WeChatPay.AppIDs) == 0 {
				got.Channels.WeChatPay.AppIDs = nil
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("Load:\n got %+v\nwant %+v", *got, want)
			}
		})
	}
}

func TestLoadRefuses(t *testing.T) {
	const secret = "Hunter2Secret"
	shortKey := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(shortKey, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		yaml    string
		environ []string
		want    []string // substrings the error must contain
		hide    []string // substrings it must not
	}{
		"redis addr and addrs both": {
			yaml: "redis: {addr: a:1, addrs: [b:2]}\n",
			want: []string{"redis.addr", "redis.addrs", "both"},
		},
		"redis mode unknown": {
			yaml: "redis: {mode: ring}\n",
			want: []string{"redis.mode", "ring"},
		},
		"redis single with two addrs": {
			yaml: "redis: {addrs: [a:1, b:2]}\n",
			want: []string{"redis.addrs", "single"},
		},
		"redis cluster without addrs": {
			yaml: "redis: {mode: cluster}\n",
			want: []string{"redis.addrs"},
		},
		"redis cluster with addr": {
			yaml: "redis: {mode: cluster, addr: a:1}\n",
			want: []string{"redis.addr", "single mode"},
		},
		"redis cluster with a db": {
			yaml: "redis: {mode: cluster, addrs: [a:1], db: 2}\n",
			want: []string{"redis.db", "cluster"},
		},
		"redis sentinel without master_name": {
			yaml: "redis: {mode: sentinel, addrs: [a:26379]}\n",
			want: []string{"redis.master_name"},
		},
		"redis master_name outside sentinel": {
			yaml: "redis: {mode: cluster, addrs: [a:1], master_name: m}\n",
			want: []string{"redis.master_name", "sentinel"},
		},
		"redis addrs not host:port": {
			yaml: "redis: {mode: cluster, addrs: [a:1, nohostport]}\n",
			want: []string{"redis.addrs", "nohostport"},
		},
		"missing file": {
			yaml: "-", // not written
			want: []string{"config file"},
		},
		"unknown nested key in file": {
			yaml: "idempotency: {redis_ttll: 5s}\n",
			want: []string{"idempotency", "redis_ttll"},
		},
		"unknown top-level key in file": {
			yaml: "foo: 1\n",
			want: []string{"foo"},
		},
		"unknown key via env": {
			yaml:    "{}\n",
			environ: []string{"PAYGW_HTTP__NOPE=1"},
			want:    []string{"http", "nope"},
		},
		"empty env value does not turn a switch off": {
			yaml:    "{}\n",
			environ: []string{"PAYGW_IDEMPOTENCY__ENABLED="},
			want:    []string{"idempotency.enabled", "empty"},
		},
		"log level": {
			yaml: "log: {level: loud}\n",
			want: []string{"log.level", "loud"},
		},
		"log format": {
			yaml: "log: {format: xml}\n",
			want: []string{"log.format", "xml"},
		},
		"body limit too small": {
			yaml: "http: {body_limit_bytes: 10}\n",
			want: []string{"http.body_limit_bytes", "10"},
		},
		"body limit too small via env": {
			yaml:    "{}\n",
			environ: []string{"PAYGW_HTTP__BODY_LIMIT_BYTES=1023"},
			want:    []string{"http.body_limit_bytes", "1023"},
		},
		"empty http addr": {
			yaml: `http: {addr: ""}` + "\n",
			want: []string{"http.addr"},
		},
		"redis ttl unparsable": {
			yaml: "idempotency: {redis_ttl: abc}\n",
			want: []string{"idempotency.redis_ttl", "invalid duration"},
		},
		"redis ttl unparsable via env": {
			yaml:    "{}\n",
			environ: []string{"PAYGW_IDEMPOTENCY__REDIS_TTL=abc"},
			want:    []string{"idempotency.redis_ttl", "invalid duration"},
		},
		"redis ttl too short": {
			yaml: "idempotency: {redis_ttl: 1ms}\n",
			want: []string{"idempotency.redis_ttl", "100ms"},
		},
		"db timeout clean zero": {
			yaml: "idempotency: {db_timeout_clean_seconds: 0}\n",
			want: []string{"idempotency.db_timeout_clean_seconds"},
		},
		"idempotency retention below the channels' retry window": {
			yaml: "idempotency: {retention: 71h}\n",
			want: []string{"idempotency.retention", "72h0m0s", "71h0m0s"},
		},
		"idempotency retention zero via env": {
			yaml:    "{}\n",
			environ: []string{"PAYGW_IDEMPOTENCY__RETENTION=0s"},
			want:    []string{"idempotency.retention"},
		},
		"journal retention below a month": {
			yaml: "journal: {retention: 240h}\n",
			want: []string{"journal.retention", "720h0m0s", "240h0m0s"},
		},
		"events retention below the webhooks' retry schedule": {
			yaml: "events: {retention: 24h}\n",
			want: []string{"events.retention", "72h0m0s", "24h0m0s"},
		},
		"events retention unparsable": {
			yaml: "events: {retention: a month}\n",
			want: []string{"events.retention", "invalid duration"},
		},
		"journal retention unparsable": {
			yaml: "journal: {retention: forever}\n",
			want: []string{"journal.retention", "invalid duration"},
		},
		"key header not a header name": {
			yaml: `idempotency: {key_header: "Idem Key"}` + "\n",
			want: []string{"idempotency.key_header"},
		},
		"redis db out of range": {
			yaml: "redis: {db: 16}\n",
			want: []string{"redis.db"},
		},
		"max open conns zero": {
			yaml: "mysql: {max_open_conns: 0}\n",
			want: []string{"mysql.max_open_conns"},
		},
		"group lanes negative": {
			yaml: "mysql: {group_lanes: -1}\n",
			want: []string{"mysql.group_lanes"},
		},
		"group lanes beyond the pool": {
			yaml: "mysql: {max_open_conns: 4, group_lanes: 5}\n",
			want: []string{"mysql.group_lanes", "(4)"},
		},
		"short token": {
			yaml: "auth: {api_tokens: [{name: shop, token: tooShortTok}]}\n",
			want: []string{"auth.api_tokens[0].token", "16"},
			hide: []string{"tooShortTok"},
		},
		"bad token name": {
			yaml: "auth: {api_tokens: [{name: Shop A, token: 0123456789abcdef}]}\n",
			want: []string{"auth.api_tokens[0].name"},
		},
		"duplicate token names": {
			yaml: `
auth:
  api_tokens:
    - {name: shop, token: 0123456789abcdef}
    - {name: shop, token: fedcba9876543210}
`,
			want: []string{"auth.api_tokens[1].name", "twice"},
		},
		"duplicate token values": {
			yaml: `
auth:
  api_tokens:
    - {name: shop-a, token: 0123456789abcdef}
    - {name: shop-b, token: 0123456789abcdef}
`,
			want: []string{"auth.api_tokens[1].token"},
			hide: []string{"0123456789abcdef"},
		},
		"token and token_sha256 both": {
			yaml: "auth: {api_tokens: [{name: shop, token: " + secret + "Long, token_sha256: " + strings.Repeat("ab", 32) + "}]}\n",
			want: []string{"auth.api_tokens[0]", "exactly one of token, token_sha256 and token_file", "got 2"},
			hide: []string{secret},
		},
		"no token at all": {
			yaml: "auth: {api_tokens: [{name: shop, roles: [viewer]}]}\n",
			want: []string{"auth.api_tokens[0]", "exactly one", "got 0"},
		},
		"token_sha256 not lower-case hex": {
			yaml: "auth: {api_tokens: [{name: shop, token_sha256: " + strings.Repeat("AB", 32) + "}]}\n",
			want: []string{"auth.api_tokens[0].token_sha256", "64 lower-case hex"},
		},
		"token_file missing": {
			yaml: "auth: {api_tokens: [{name: shop, token_file: /nonexistent/paygw-token}]}\n",
			want: []string{"auth.api_tokens[0].token_file", "cannot be read"},
		},
		"unknown role": {
			yaml: "auth: {api_tokens: [{name: shop, token: " + secret + "Long, roles: [viewer, superuser]}]}\n",
			want: []string{"auth.api_tokens[0].roles[1]", `unknown role "superuser"`, "order_service, viewer, operator, finance, admin"},
			hide: []string{secret},
		},
		"same token as a digest and in clear": {
			yaml: "auth: {api_tokens: [{name: a, token: 0123456789abcdef}, {name: b, token_sha256: " + sha256Of("0123456789abcdef") + "}]}\n",
			want: []string{"auth.api_tokens[1].token_sha256", "another client's"},
			hide: []string{"0123456789abcdef"},
		},
		"alipay enabled without key": {
			yaml: `channels: {alipay: {enabled: true, app_id: "2021"}}` + "\n",
			want: []string{"channels.alipay.alipay_public_key_file", "channels.alipay.alipay_public_key"},
		},
		"alipay enabled with key and key file": {
			yaml: `channels: {alipay: {enabled: true, app_id: "2021", alipay_public_key_file: /k.pem, alipay_public_key: MIIB}}` + "\n",
			want: []string{"channels.alipay.alipay_public_key_file", "exactly one"},
		},
		"alipay enabled without app id": {
			yaml: `channels: {alipay: {enabled: true, alipay_public_key_file: /k.pem}}` + "\n",
			want: []string{"channels.alipay.app_id"},
		},
		"mysql dsn invalid": {
			yaml: `mysql: {dsn: "paygw:` + secret + `@tcp(127.0.0.1:3306/paygw"}` + "\n",
			want: []string{"mysql.dsn", "not a valid DSN"},
			hide: []string{secret},
		},
		"mysql dsn invalid via env": {
			yaml:    "{}\n",
			environ: []string{"PAYGW_MYSQL__DSN=paygw:" + secret + "@tcp(127.0.0.1:3306/paygw"},
			want:    []string{"mysql.dsn", "not a valid DSN"},
			hide:    []string{secret},
		},
		"wechatpay without merchant, short key, no platform key": {
			yaml: "channels: {wechatpay: {enabled: true, api_v3_key: short}}\n",
			want: []string{"channels.wechatpay.mch_id", "channels.wechatpay.app_id", "channels.wechatpay.api_v3_key", "channels.wechatpay.platform_public_key_file"},
			hide: []string{"short"},
		},
		"wechatpay app_ids with an empty entry and a repeat": {
			yaml: "channels: {wechatpay: {enabled: true, mch_id: m, app_ids: [wxA, '', wxA, ' wxB'], api_v3_key: 0123456789abcdef0123456789abcdef, platform_public_key_id: P, platform_public_key_file: /k.pem}}\n",
			want: []string{"channels.wechatpay.app_ids[1]", "channels.wechatpay.app_ids[2]", "twice", "channels.wechatpay.app_ids[3]"},
		},
		"unionpay signer_name emptied": {
			yaml: `channels: {unionpay: {enabled: true, mer_id: "777", root_cert_file: /r.pem, intermediate_cert_file: /i.pem, signer_name: " "}}` + "\n",
			want: []string{"channels.unionpay.signer_name"},
		},
		"wechatpay key id without key file": {
			yaml: "channels: {wechatpay: {enabled: true, mch_id: m, app_id: a, api_v3_key: 0123456789abcdef0123456789abcdef, platform_public_key_id: PUB_KEY_ID_1}}\n",
			want: []string{"channels.wechatpay.platform_public_key_id"},
		},
		"stripe without secrets": {
			yaml: "channels: {stripe: {enabled: true}}\n",
			want: []string{"channels.stripe.webhook_secrets"},
		},
		"stripe secret of the wrong kind, tolerance zero": {
			yaml: "channels: {stripe: {enabled: true, webhook_secrets: [sk_live_" + secret + "], tolerance: 0s}}\n",
			want: []string{"channels.stripe.webhook_secrets[0]", "channels.stripe.tolerance"},
			hide: []string{secret},
		},
		"unionpay without merchant and certificates": {
			yaml: "channels: {unionpay: {enabled: true}}\n",
			want: []string{"channels.unionpay.mer_id", "channels.unionpay.root_cert_file", "channels.unionpay.intermediate_cert_file"},
		},
		"reconcile intervals and rate": {
			yaml: "reconcile: {query_interval: 10ms, query_after: 1h, query_max_age: 30m, qps: 0}\n",
			want: []string{"reconcile.query_interval", "reconcile.query_max_age", "reconcile.qps"},
		},
		"bill_at not HH:MM": {
			yaml: "reconcile: {bill_at: \"24:00\"}\n",
			want: []string{"reconcile.bill_at", "24:00"},
		},
		"bill_at without its leading zero": {
			yaml: "reconcile: {bill_at: \"9:30\"}\n",
			want: []string{"reconcile.bill_at"},
		},
		"outbound URLs and a Stripe key of the wrong kind": {
			yaml: "channels: {alipay: {gateway_url: \"ftp://x\"}, wechatpay: {api_base_url: \"\"}, stripe: {api_key: whsec_" + secret + ", api_base_url: \"not a url\"}, unionpay: {query_url: \"https://\"}}\n",
			want: []string{"channels.alipay.gateway_url", "channels.stripe.api_key", "channels.stripe.api_base_url", "channels.unionpay.query_url"},
			hide: []string{secret},
		},
		"console session_ttl too short": {
			yaml: "console: {session_ttl: 10s}\n",
			want: []string{"console.session_ttl", "between 1m and 168h"},
		},
		"console session key file missing": {
			yaml: "console: {session_key_file: /nonexistent/paygw-console.key}\n",
			want: []string{"console.session_key_file", "cannot be read"},
		},
		"console session key too short": {
			yaml: "console: {session_key_file: " + shortKey + "}\n",
			want: []string{"console.session_key_file", "at least 32 bytes"},
			hide: []string{secret},
		},
		"mysql dsn without database": {
			yaml: `mysql: {dsn: "paygw:` + secret + `@tcp(127.0.0.1:3306)/"}` + "\n",
			want: []string{"mysql.dsn", "database"},
			hide: []string{secret},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "absent.yaml")
			if tc.yaml != "-" {
				path = writeConfig(t, tc.yaml)
			}
			c, err := Load(path, tc.environ)
			if err == nil {
				t.Fatalf("Load succeeded with %+v; want an error", *c)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not name %q", msg, w)
				}
			}
			for _, h := range tc.hide {
				if strings.Contains(msg, h) {
					t.Errorf("error %q reveals %q", msg, h)
				}
			}
		})
	}
}

func TestMasked(t *testing.T) {
	const (
		dbPass    = "DbPa55wordXyz"
		redisPass = "RedisPa55Xyz"
		token     = "ApiT0kenSecretValue"
		v3Key     = "V3KeyV3KeyV3KeyV3KeyV3KeyV3Key32"
		whsec     = "whsec_StripeSecretValue"
		apiKey    = "sk_live_StripeApiKeyValue"
		pfxPass   = "PfxPa55wordXyz"
	)
	path := writeConfig(t, `
mysql: {dsn: "paygw:`+dbPass+`@tcp(127.0.0.1:3306)/paygw?parseTime=true"}
redis: {password: `+redisPass+`}
auth: {api_tokens: [{name: shop-visible, token: `+token+`}]}
channels:
  wechatpay: {api_v3_key: `+v3Key+`}
  stripe: {webhook_secrets: [`+whsec+`], api_key: `+apiKey+`}
  unionpay: {sign_cert_password: `+pfxPass+`}
`)
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := c.Masked()
	for _, s := range []string{dbPass, redisPass, token, v3Key, whsec, apiKey, pfxPass} {
		if strings.Contains(out, s) {
			t.Errorf("Masked() reveals %q: %s", s, out)
		}
	}
	for _, s := range []string{"shop-visible", "paygw:***@tcp(127.0.0.1:3306)/paygw"} {
		if !strings.Contains(out, s) {
			t.Errorf("Masked() lacks %q: %s", s, out)
		}
	}
	// Masking works on a copy: the live configuration keeps its secrets.
	if c.MySQL.DSN != "paygw:"+dbPass+"@tcp(127.0.0.1:3306)/paygw?parseTime=true" ||
		c.Redis.Password != redisPass || c.Auth.APITokens[0].Token != token {
		t.Errorf("Masked() changed the config: %+v", *c)
	}
}

func TestPath(t *testing.T) {
	tests := map[string]struct {
		flag, env, want string
	}{
		"flag wins over env":    {flag: "/from/flag.yaml", env: "/from/env.yaml", want: "/from/flag.yaml"},
		"flag without env":      {flag: "/from/flag.yaml", want: "/from/flag.yaml"},
		"env wins over default": {env: "/from/env.yaml", want: "/from/env.yaml"},
		"default":               {want: DefaultPath},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("PAYGW_CONFIG", tc.env)
			if got := Path(tc.flag); got != tc.want {
				t.Errorf("Path(%q) with PAYGW_CONFIG=%q = %q, want %q", tc.flag, tc.env, got, tc.want)
			}
		})
	}
}

func TestBillAtClock(t *testing.T) {
	for in, want := range map[string][3]int{"10:30": {10, 30, 1}, "00:00": {0, 0, 1}, "23:59": {23, 59, 1},
		"24:00": {0, 0, 0}, "12:60": {0, 0, 0}, "1030": {0, 0, 0}, "10:3": {0, 0, 0}, "ab:cd": {0, 0, 0}, "": {0, 0, 0}} {
		h, m, ok := Reconcile{BillAt: in}.BillAtClock()
		if ok != (want[2] == 1) || ok && (h != want[0] || m != want[1]) {
			t.Errorf("%q: %d:%d %v, want %v", in, h, m, ok, want)
		}
	}
}

func sha256Of(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// TestTokenForms: a token given in clear, by its SHA-256 and in a file (trailing newline and all)
// has the digest of the token itself; roles are read, and a client without roles is admin.
func TestTokenForms(t *testing.T) {
	const clear, hashed, filed = "clear-token-0123456789", "hashed-token-0123456789", "filed-token-0123456789"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(filed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, `
auth:
  api_tokens:
    - {name: legacy, token: `+clear+`}
    - {name: fin, token_sha256: `+sha256Of(hashed)+`, roles: [finance, operator]}
    - {name: shop, token_file: `+file+`, roles: [order_service]}
`)
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token string
		roles []access.Role
	}{{clear, []access.Role{access.Admin}}, {hashed, []access.Role{access.Finance, access.Operator}}, {filed, []access.Role{access.OrderService}}}
	for i, tc := range tests {
		got := c.Auth.APITokens[i]
		if got.Digest() != sha256.Sum256([]byte(tc.token)) {
			t.Errorf("%s: digest is not the token's", got.Name)
		}
		if !slices.Equal(got.RoleList(), tc.roles) || got.Legacy() != (i == 0) {
			t.Errorf("%s: roles %v (legacy %v), want %v", got.Name, got.RoleList(), got.Legacy(), tc.roles)
		}
	}
	out := c.Masked()
	for _, s := range []string{clear, sha256Of(hashed), filed} {
		if strings.Contains(out, s) {
			t.Errorf("Masked() reveals %q: %s", s, out)
		}
	}
	if !strings.Contains(out, file) || !strings.Contains(out, "order_service") {
		t.Errorf("Masked() lacks the token file or the roles: %s", out)
	}
}

// TestConsoleKey: the console's session key is the key file's content, without its newline.
func TestConsoleKey(t *testing.T) {
	key := strings.Repeat("k", 64)
	file := filepath.Join(t.TempDir(), "console.key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(writeConfig(t, "console: {session_key_file: "+file+", session_ttl: 30m}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Console.SessionKey()) != key || c.Console.SessionTTL != 30*time.Minute {
		t.Fatalf("session key %q, ttl %s", c.Console.SessionKey(), c.Console.SessionTTL)
	}
	if strings.Contains(c.Masked(), key) {
		t.Fatal("the masked config holds the session key")
	}
}
