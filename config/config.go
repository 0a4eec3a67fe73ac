// Package config owns paygw's one typed configuration: defaults, then a YAML file, then
// PAYGW_ environment overrides, validated before anything starts.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/internal/batch"
)

// DefaultPath is read when neither --config nor PAYGW_CONFIG names a file.
const DefaultPath = "config/paygw.yaml"

type Config struct {
	HTTP        HTTP        `koanf:"http"`
	Log         Log         `koanf:"log"`
	MySQL       MySQL       `koanf:"mysql"`
	Redis       Redis       `koanf:"redis"`
	Idempotency Idempotency `koanf:"idempotency"`
	Auth        Auth        `koanf:"auth"`
	Channels    Channels    `koanf:"channels"`
	Reconcile   Reconcile   `koanf:"reconcile"`
	Admin       Admin       `koanf:"admin"`
	Journal     Journal     `koanf:"journal"`
	Webhooks    Webhooks    `koanf:"webhooks"`
	Events      Events      `koanf:"events"`
	Console     Console     `koanf:"console"`
}

// Console is the operators' console under /console on http.addr (console/): a login with an
// API token opens a session of SessionTTL, in a cookie signed with the key in SessionKeyFile.
// Without a key file each process signs with a random key of its own: sessions end when it
// stops, and replicas behind one address do not share them.
type Console struct {
	Enabled        bool          `koanf:"enabled"`
	SessionTTL     time.Duration `koanf:"session_ttl"`
	SessionKeyFile string        `koanf:"session_key_file"`

	key []byte // SessionKeyFile's key, read by Validate
}

// SessionKey is the key read from SessionKeyFile (nil without one). Call it after Validate.
func (c Console) SessionKey() []byte { return c.key }

// minSessionKey is the shortest session key accepted: 32 bytes, as many as the HMAC's output.
const minSessionKey = 32

// validateConsole reads the session key file and bounds the session's life.
func (c *Config) validateConsole(bad func(key, format string, args ...any)) {
	k := &c.Console
	if k.SessionTTL < time.Minute || k.SessionTTL > 7*24*time.Hour {
		bad("console.session_ttl", "must be between 1m and 168h, got %s", k.SessionTTL)
	}
	if k.SessionKeyFile == "" {
		return
	}
	b, err := os.ReadFile(k.SessionKeyFile) // #nosec G304 -- the operator names the file
	if err != nil {
		bad("console.session_key_file", "cannot be read: %v", errors.Unwrap(err))
		return
	}
	key := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if len(key) < minSessionKey {
		bad("console.session_key_file", "must hold at least %d bytes (e.g. openssl rand -hex 32)", minSessionKey)
		return
	}
	k.key = []byte(key)
}

// Journal is the notification journal: every verified notification and trade-query answer.
type Journal struct {
	// Retention: rows received longer ago than this are purged (`paygw purge`, serve's daily
	// pass). The default, 400 days, is a year of audits plus slack.
	Retention time.Duration `koanf:"retention"`
}

// Events is the outbox: the events of every order change, served by GET /v1/events.
type Events struct {
	// Retention: numbered events written longer ago than this are purged (serve's daily pass,
	// `paygw purge`). The default, 30 days, is the feed's and the webhooks' window.
	Retention time.Duration `koanf:"retention"`
}

// MinEventRetention outlasts the webhooks' whole retry schedule (about 28 hours) with slack: an
// event is not purged before its deliveries could end.
const MinEventRetention = 72 * time.Hour

// Reconcile is the job that asks the channels about orders whose notification never came.
type Reconcile struct {
	QueryInterval time.Duration `koanf:"query_interval"` // 0 turns the in-serve runner off
	QueryAfter    time.Duration `koanf:"query_after"`    // first query once an attempt is this old
	QueryMaxAge   time.Duration `koanf:"query_max_age"`  // stop asking after this
	QPS           int           `koanf:"qps"`            // per channel, outbound

	// Bills: Stripe's day is in this zone (the Chinese channels' is Asia/Shanghai); a payment
	// missing from its day's bill is LOCAL_ONLY after local_only_grace, or once the next day's
	// bill lacks it too.
	StripeTimezone string        `koanf:"stripe_timezone"`
	LocalOnlyGrace time.Duration `koanf:"local_only_grace"`
	// BillAt is when serve runs yesterday's bill of each channel with outbound credentials,
	// "HH:MM" in the channel's time (Beijing time for the Chinese channels, stripe_timezone for
	// Stripe). The channels make a day's bill after 10:00 the next day.
	BillAt string `koanf:"bill_at"`
}

// BillAtClock is reconcile.bill_at as hour and minute (valid once Load succeeded).
func (r Reconcile) BillAtClock() (hour, minute int, ok bool) {
	s := r.BillAt
	if len(s) != 5 || s[2] != ':' {
		return 0, 0, false
	}
	for _, i := range []int{0, 1, 3, 4} {
		if s[i] < '0' || s[i] > '9' {
			return 0, 0, false
		}
	}
	hour, minute = int(s[0]-'0')*10+int(s[1]-'0'), int(s[3]-'0')*10+int(s[4]-'0')
	return hour, minute, hour < 24 && minute < 60
}

// Admin is an operators-only listener: /debug/pprof. Off unless addr is set; bind it to
// loopback or an admin network, never to the address channels reach.
type Admin struct {
	Addr string `koanf:"addr"`
}

type HTTP struct {
	Addr            string        `koanf:"addr"`
	BodyLimitBytes  int64         `koanf:"body_limit_bytes"`
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
}

type Log struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

type MySQL struct {
	DSN          string `koanf:"dsn"`
	MaxOpenConns int    `koanf:"max_open_conns"`
	// GroupLanes: how many payment transactions run at once before first-time payments queue
	// and are applied in shared transactions (group apply), and likewise for the idempotent
	// creates (a group takes a SKU's units with one UPDATE); 0 runs each alone.
	GroupLanes int `koanf:"group_lanes"`
}

// Redis is where the guard keeps its locks and done markers. Mode single talks to one server
// (redis.addr, or a one-item redis.addrs); cluster to a Redis Cluster seeded by redis.addrs; sentinel
// to the master that the Sentinels at redis.addrs name redis.master_name.
type Redis struct {
	Addr       string   `koanf:"addr"`
	Addrs      []string `koanf:"addrs"`
	Mode       string   `koanf:"mode"`
	MasterName string   `koanf:"master_name"`
	Password   string   `koanf:"password"`
	DB         int      `koanf:"db"`
}

// DefaultRedisAddr is the server of single mode when neither redis.addr nor redis.addrs is set.
const DefaultRedisAddr = "127.0.0.1:6379"

// Endpoints is the list of addresses to dial: redis.addrs, else redis.addr, else DefaultRedisAddr.
func (r Redis) Endpoints() []string {
	switch {
	case len(r.Addrs) > 0:
		return r.Addrs
	case r.Addr != "":
		return []string{r.Addr}
	}
	return []string{DefaultRedisAddr}
}

type Idempotency struct {
	Enabled               bool          `koanf:"enabled"`
	KeyHeader             string        `koanf:"key_header"`
	RedisTTL              time.Duration `koanf:"redis_ttl"`
	DBTimeoutCleanSeconds int           `koanf:"db_timeout_clean_seconds"`
	ReturnOriginalResult  bool          `koanf:"return_original_result"`
	// Retention: final (success or failed) records created longer ago than this are purged.
	// Never below MinIdempotencyRetention: a channel still retrying a notification, or a client
	// retrying a create, must find the record.
	Retention time.Duration `koanf:"retention"`
}

// MinIdempotencyRetention is the longest window in which a channel retries a notification
// (WeChat Pay and Alipay retry for about a day, Stripe for up to three days).
const MinIdempotencyRetention = 72 * time.Hour

// MinJournalRetention keeps at least a month of notifications for the daily bills and for
// answering a customer's question about a recent payment.
const MinJournalRetention = 30 * 24 * time.Hour

// ProcessingTimeout is how long a `processing` record may live before the sweeper fails it.
func (i Idempotency) ProcessingTimeout() time.Duration {
	return time.Duration(i.DBTimeoutCleanSeconds) * time.Second
}

type Auth struct {
	APITokens []APIToken `koanf:"api_tokens"`
}

// APIToken is one /v1 client. Name scopes its idempotency keys. Exactly one of Token,
// TokenSHA256 (the lower-case hex SHA-256 of the token) and TokenFile (a file holding the token,
// a trailing newline ignored) says what the client sends. Roles say what it may do; none at all
// is admin, for the configurations written before roles.
type APIToken struct {
	Name        string   `koanf:"name"`
	Token       string   `koanf:"token"`
	TokenSHA256 string   `koanf:"token_sha256"`
	TokenFile   string   `koanf:"token_file"`
	Roles       []string `koanf:"roles"`

	fromFile string // TokenFile's token, read by Validate
}

type Channels struct {
	Alipay    Alipay    `koanf:"alipay"`
	WeChatPay WeChatPay `koanf:"wechatpay"`
	Stripe    Stripe    `koanf:"stripe"`
	UnionPay  UnionPay  `koanf:"unionpay"`
}

type Alipay struct {
	Enabled             bool   `koanf:"enabled"`
	AppID               string `koanf:"app_id"`
	SellerID            string `koanf:"seller_id"`
	AlipayPublicKeyFile string `koanf:"alipay_public_key_file"`
	AlipayPublicKey     string `koanf:"alipay_public_key"`

	// Outbound (trade query): the merchant app private key, PKCS#1 or PKCS#8 PEM.
	AppPrivateKeyFile string `koanf:"app_private_key_file"`
	GatewayURL        string `koanf:"gateway_url"`

	// FeeRate is the contract's fee rate, a decimal fraction ("0.006"): each payment line's fee
	// in the bill is checked against it (see feerate.go). Optional.
	FeeRate string `koanf:"fee_rate"`
}

// WeChatPay is API v3: public-key mode (platform_public_key_id + _file), certificate mode
// (platform_certificate_files, several during rotation), or both during the switch-over.
type WeChatPay struct {
	Enabled                  bool     `koanf:"enabled"`
	MchID                    string   `koanf:"mch_id"`
	AppID                    string   `koanf:"app_id"`  // one appid; kept working beside app_ids
	AppIDs                   []string `koanf:"app_ids"` // every appid paying to mch_id (official account, mini program, app)
	APIv3Key                 string   `koanf:"api_v3_key"`
	PlatformPublicKeyID      string   `koanf:"platform_public_key_id"`
	PlatformPublicKeyFile    string   `koanf:"platform_public_key_file"`
	PlatformCertificateFiles []string `koanf:"platform_certificate_files"`

	// Outbound (trade query): the merchant API private key (apiclient_key.pem) and its
	// certificate's serial.
	MerchantPrivateKeyFile string `koanf:"merchant_private_key_file"`
	MerchantSerialNo       string `koanf:"merchant_serial_no"`
	APIBaseURL             string `koanf:"api_base_url"`

	// FeeRate is the contract's fee rate, a decimal fraction ("0.006"): each payment line's fee
	// in the bill is checked against it (see feerate.go). Optional.
	FeeRate string `koanf:"fee_rate"`
}

// Stripe webhooks: every secret in webhook_secrets (newest first) is accepted, for rotation.
type Stripe struct {
	Enabled        bool          `koanf:"enabled"`
	WebhookSecrets []string      `koanf:"webhook_secrets"`
	Tolerance      time.Duration `koanf:"tolerance"`

	// Outbound (trade query): an sk_ or rk_ key with read access to PaymentIntents and balance.
	APIKey     string `koanf:"api_key"`
	APIBaseURL string `koanf:"api_base_url"`

	// FeeRate is the contract's fee rate, a decimal fraction ("0.006"): each payment line's fee
	// in the bill is checked against it (see feerate.go). Optional.
	FeeRate string `koanf:"fee_rate"`
}

// UnionPay ACP 5.1.0: the signing certificate in each message must chain to these, and name
// signer_name as its organisation (UnionPay's test environment signs as "00040000:SIGN").
type UnionPay struct {
	Enabled              bool   `koanf:"enabled"`
	MerID                string `koanf:"mer_id"`
	RootCertFile         string `koanf:"root_cert_file"`
	IntermediateCertFile string `koanf:"intermediate_cert_file"`
	SignerName           string `koanf:"signer_name"`

	// Outbound (trade query): the merchant signing certificate, PKCS#12 (.pfx).
	SignCertFile     string `koanf:"sign_cert_file"`
	SignCertPassword string `koanf:"sign_cert_password"`
	QueryURL         string `koanf:"query_url"`

	// FeeRate is the contract's fee rate, a decimal fraction ("0.006"): each payment line's fee
	// in the bill is checked against it (see feerate.go). Optional.
	FeeRate string `koanf:"fee_rate"`
}

func defaults() map[string]any {
	return map[string]any{
		"http.addr":                            "127.0.0.1:8080",
		"http.body_limit_bytes":                1 << 20,
		"http.shutdown_timeout":                "10s",
		"log.level":                            "info",
		"log.format":                           "json",
		"mysql.dsn":                            "root@tcp(127.0.0.1:3306)/paygw?parseTime=true&loc=UTC",
		"mysql.max_open_conns":                 32,
		"mysql.group_lanes":                    batch.DefaultLanes,
		"redis.mode":                           "single",
		"redis.password":                       "",
		"redis.db":                             0,
		"idempotency.enabled":                  true,
		"idempotency.key_header":               "Idempotency-Key",
		"idempotency.redis_ttl":                "30s",
		"idempotency.db_timeout_clean_seconds": 600,
		"idempotency.return_original_result":   true,
		"idempotency.retention":                "168h",
		"journal.retention":                    "9600h",
		"events.retention":                     "720h",
		"channels.alipay.enabled":              false,
		"channels.wechatpay.enabled":           false,
		"channels.stripe.enabled":              false,
		"channels.stripe.tolerance":            "300s",
		"channels.unionpay.enabled":            false,
		"channels.unionpay.signer_name":        "中国银联股份有限公司",
		"channels.alipay.gateway_url":          "https://openapi.alipay.com/gateway.do",
		"channels.wechatpay.api_base_url":      "https://api.mch.weixin.qq.com",
		"channels.stripe.api_base_url":         "https://api.stripe.com",
		"channels.unionpay.query_url":          "https://gateway.95516.com/gateway/api/queryTrans.do",
		"reconcile.query_interval":             "1m",
		"reconcile.query_after":                "10m",
		"reconcile.query_max_age":              "72h",
		"reconcile.qps":                        10,
		"reconcile.stripe_timezone":            "UTC",
		"reconcile.local_only_grace":           "48h",
		"reconcile.bill_at":                    "10:30",
		"admin.addr":                           "",
		"console.enabled":                      true,
		"console.session_ttl":                  "8h",
		"console.session_key_file":             "",
		"webhooks.retry_schedule":              DefaultRetrySchedule,
	}
}

// Path picks the config file: the flag, else PAYGW_CONFIG, else DefaultPath.
func Path(flag string) string {
	if flag != "" {
		return flag
	}
	if p := os.Getenv("PAYGW_CONFIG"); p != "" {
		return p
	}
	return DefaultPath
}

// Load reads defaults, the YAML file at path, and PAYGW_ overrides from environ (KEY=VALUE
// strings, as os.Environ returns), refusing unknown keys and invalid values.
func Load(path string, environ []string) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaults(), "."), nil); err != nil {
		return nil, err
	}
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if err := k.Load(envProvider(environ), nil); err != nil {
		return nil, err
	}
	var c Config
	err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			refuseEmptyScalars,
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","), // lists from the environment: a,b
			stringToDurations,
			mapstructure.TextUnmarshallerHookFunc()),
		ErrorUnused:      true,
		WeaklyTypedInput: true,
		Result:           &c,
		TagName:          "koanf",
	}})
	if err != nil {
		return nil, fmt.Errorf("config: %s", decodeMessage(err))
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// refuseEmptyScalars stops weak typing from reading an empty string (PAYGW_IDEMPOTENCY__ENABLED=)
// as false or 0: a switch that was meant to be set must not quietly turn off.
func refuseEmptyScalars(from, to reflect.Type, data any) (any, error) {
	if s, ok := data.(string); ok && s == "" {
		switch to.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			return nil, errors.New("must not be empty")
		}
	}
	return data, nil
}

// envProvider maps PAYGW_MYSQL__DSN to mysql.dsn. Only names with "__" are keys, so
// PAYGW_CONFIG and the test harness's PAYGW_TEST_* variables are not mistaken for settings.
func envProvider(environ []string) koanf.Provider {
	m := map[string]any{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "PAYGW_") || !strings.Contains(name, "__") {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "PAYGW_"), "__", "."))
		m[key] = value
	}
	return confmap.Provider(m, ".")
}

var (
	headerName = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
	tokenName  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Validate checks every value and names the key of the first one that is wrong.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config %s: "+format, append([]any{key}, args...)...))
	}
	if c.HTTP.Addr == "" {
		bad("http.addr", "must be set (host:port)")
	}
	if c.HTTP.BodyLimitBytes < 1024 || c.HTTP.BodyLimitBytes > 8<<20 {
		bad("http.body_limit_bytes", "must be between 1024 and 8388608 (the journal keeps each body whole), got %d", c.HTTP.BodyLimitBytes)
	}
	if c.HTTP.ShutdownTimeout <= 0 {
		bad("http.shutdown_timeout", "must be a positive duration such as 10s")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	if c.Log.Format != "json" && c.Log.Format != "console" {
		bad("log.format", "must be json or console, got %q", c.Log.Format)
	}
	if dsn, err := mysql.ParseDSN(c.MySQL.DSN); err != nil {
		bad("mysql.dsn", "is not a valid DSN") // the text may hold the password: not echoed
	} else if dsn.DBName == "" {
		bad("mysql.dsn", "must name a database")
	}
	if c.MySQL.MaxOpenConns < 1 || c.MySQL.MaxOpenConns > 1000 {
		bad("mysql.max_open_conns", "must be between 1 and 1000, got %d", c.MySQL.MaxOpenConns)
	}
	if c.MySQL.GroupLanes < 0 || c.MySQL.GroupLanes > c.MySQL.MaxOpenConns {
		bad("mysql.group_lanes", "must be between 0 (off) and mysql.max_open_conns (%d), got %d", c.MySQL.MaxOpenConns, c.MySQL.GroupLanes)
	}
	c.validateRedis(bad)
	if !headerName.MatchString(c.Idempotency.KeyHeader) {
		bad("idempotency.key_header", "must be an HTTP header name, got %q", c.Idempotency.KeyHeader)
	}
	if c.Idempotency.RedisTTL < 100*time.Millisecond {
		bad("idempotency.redis_ttl", "must be at least 100ms, got %s", c.Idempotency.RedisTTL)
	}
	if c.Idempotency.DBTimeoutCleanSeconds < 1 {
		bad("idempotency.db_timeout_clean_seconds", "must be at least 1, got %d", c.Idempotency.DBTimeoutCleanSeconds)
	}
	if c.Idempotency.Retention < MinIdempotencyRetention {
		bad("idempotency.retention", "must be at least %s (the longest channel retry window), got %s", MinIdempotencyRetention, c.Idempotency.Retention)
	}
	if c.Journal.Retention < MinJournalRetention {
		bad("journal.retention", "must be at least %s (30 days), got %s", MinJournalRetention, c.Journal.Retention)
	}
	if c.Events.Retention < MinEventRetention {
		bad("events.retention", "must be at least %s (the webhooks' retry schedule), got %s", MinEventRetention, c.Events.Retention)
	} else if span := c.Webhooks.scheduleSpan(); c.Events.Retention < 2*span {
		// An order's events wait for each other: a later one's schedule starts when the earlier
		// one's ends. Twice the span keeps a second event stored through its last retry.
		bad("events.retention", "must be at least twice webhooks.retry_schedule's total (%s), got %s", span, c.Events.Retention)
	}
	c.validateReconcile(bad)
	c.validateAuth(bad)
	if a := c.Channels.Alipay; a.Enabled {
		if a.AppID == "" {
			bad("channels.alipay.app_id", "must be set when the channel is enabled")
		}
		if (a.AlipayPublicKeyFile == "") == (a.AlipayPublicKey == "") {
			bad("channels.alipay.alipay_public_key_file", "exactly one of it and channels.alipay.alipay_public_key must be set")
		}
	}
	if c.Admin.Addr != "" && c.Admin.Addr == c.HTTP.Addr {
		bad("admin.addr", "must differ from http.addr: the admin listener is not for the channels")
	}
	c.validateChannels(bad)
	c.validateWebhooks(bad)
	c.validateConsole(bad)
	if len(errs) == 0 {
		return nil
	}
	return oneLine(errs)
}

// validateAuth: every API client has a name, one token of its own, and known roles.
func (c *Config) validateAuth(bad func(key, format string, args ...any)) {
	names, digests := map[string]bool{}, map[[sha256.Size]byte]bool{}
	for i := range c.Auth.APITokens {
		t := &c.Auth.APITokens[i]
		key := fmt.Sprintf("auth.api_tokens[%d]", i)
		if !tokenName.MatchString(t.Name) {
			bad(key+".name", "must be 1-32 characters of [a-z0-9_-], got %q", t.Name)
		}
		if names[t.Name] {
			bad(key+".name", "%q is used twice", t.Name)
		}
		names[t.Name] = true
		if !t.validSecret(key, bad) {
			continue
		}
		if d := t.Digest(); digests[d] {
			bad(key+"."+t.secretKey(), "is the same as another client's")
		} else {
			digests[d] = true
		}
		for j, r := range t.Roles {
			if !access.Valid(r) {
				bad(fmt.Sprintf("%s.roles[%d]", key, j), "unknown role %q (one of %s)", r, roleList())
			}
		}
	}
}

// validSecret checks that exactly one of token, token_sha256 and token_file is set, and well;
// it reads token_file. Nothing it says holds the secret.
func (t *APIToken) validSecret(key string, bad func(key, format string, args ...any)) bool {
	set := 0
	for _, v := range []string{t.Token, t.TokenSHA256, t.TokenFile} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		bad(key, "must set exactly one of token, token_sha256 and token_file, got %d", set)
		return false
	}
	switch {
	case t.Token != "" && len(t.Token) < 16:
		bad(key+".token", "must be at least 16 characters")
	case t.TokenSHA256 != "" && !sha256Hex.MatchString(t.TokenSHA256):
		bad(key+".token_sha256", "must be 64 lower-case hex digits (the SHA-256 of the token)")
	case t.TokenFile != "":
		return t.readTokenFile(key, bad)
	default:
		return true
	}
	return false
}

// secretKey names the key the client's token is given by.
func (t *APIToken) secretKey() string {
	switch {
	case t.TokenSHA256 != "":
		return "token_sha256"
	case t.TokenFile != "":
		return "token_file"
	}
	return "token"
}

// readTokenFile reads the token from TokenFile, a trailing newline ignored.
func (t *APIToken) readTokenFile(key string, bad func(key, format string, args ...any)) bool {
	b, err := os.ReadFile(t.TokenFile) // #nosec G304 -- the operator names the file
	if err != nil {
		bad(key+".token_file", "cannot be read: %v", errors.Unwrap(err))
		return false
	}
	tok := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if len(tok) < 16 || strings.ContainsAny(tok, "\r\n") {
		bad(key+".token_file", "must hold one token of at least 16 characters on one line")
		return false
	}
	t.fromFile = tok
	return true
}

// Digest is the SHA-256 of the client's token, whichever way it was given. Call it after
// Validate.
func (t APIToken) Digest() [sha256.Size]byte {
	var d [sha256.Size]byte
	switch {
	case t.TokenSHA256 != "":
		_, _ = hex.Decode(d[:], []byte(t.TokenSHA256)) // validated
	case t.TokenFile != "":
		d = sha256.Sum256([]byte(t.fromFile))
	default:
		d = sha256.Sum256([]byte(t.Token))
	}
	return d
}

// RoleList is the client's roles; admin when none is configured (see Legacy).
func (t APIToken) RoleList() []access.Role {
	if t.Legacy() {
		return []access.Role{access.Admin}
	}
	out := make([]access.Role, len(t.Roles))
	for i, r := range t.Roles {
		out[i] = access.Role(r)
	}
	return out
}

// Legacy reports a client configured without roles: it keeps working as admin, and serve warns.
func (t APIToken) Legacy() bool { return len(t.Roles) == 0 }

func roleList() string {
	s := make([]string, len(access.Roles))
	for i, r := range access.Roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

func (c *Config) validateChannels(bad func(key, format string, args ...any)) {
	c.Channels.validateFeeRates(bad)
	if w := c.Channels.WeChatPay; w.Enabled {
		if w.MchID == "" {
			bad("channels.wechatpay.mch_id", "must be set when the channel is enabled")
		}
		if w.AppID == "" && len(w.AppIDs) == 0 {
			bad("channels.wechatpay.app_id", "or channels.wechatpay.app_ids must be set when the channel is enabled")
		}
		// app_id may reappear in app_ids (the two are one list); within app_ids a repeat is a slip.
		seen := map[string]bool{}
		for i, id := range w.AppIDs {
			key := fmt.Sprintf("channels.wechatpay.app_ids[%d]", i)
			switch {
			case strings.TrimSpace(id) == "" || strings.TrimSpace(id) != id:
				bad(key, "must be an appid without surrounding white space, got %q", id)
			case seen[id]:
				bad(key, "%q is listed twice", id)
			}
			seen[id] = true
		}
		if len(w.APIv3Key) != 32 {
			bad("channels.wechatpay.api_v3_key", "must be the 32-byte APIv3 key, got %d bytes", len(w.APIv3Key))
		}
		if (w.PlatformPublicKeyID == "") != (w.PlatformPublicKeyFile == "") {
			bad("channels.wechatpay.platform_public_key_id", "and platform_public_key_file go together")
		}
		if w.PlatformPublicKeyID == "" && len(w.PlatformCertificateFiles) == 0 {
			bad("channels.wechatpay.platform_public_key_file", "or platform_certificate_files must be set")
		}
	}
	if st := c.Channels.Stripe; st.Enabled {
		if len(st.WebhookSecrets) == 0 {
			bad("channels.stripe.webhook_secrets", "must list at least one secret when the channel is enabled")
		}
		for i, sec := range st.WebhookSecrets {
			if !strings.HasPrefix(sec, "whsec_") {
				bad(fmt.Sprintf("channels.stripe.webhook_secrets[%d]", i), "must start with whsec_")
			}
		}
		if st.Tolerance < time.Second || st.Tolerance > time.Hour {
			bad("channels.stripe.tolerance", "must be between 1s and 1h, got %s", st.Tolerance)
		}
	}
	if u := c.Channels.UnionPay; u.Enabled {
		if u.MerID == "" {
			bad("channels.unionpay.mer_id", "must be set when the channel is enabled")
		}
		if u.RootCertFile == "" {
			bad("channels.unionpay.root_cert_file", "must be set when the channel is enabled")
		}
		if u.IntermediateCertFile == "" {
			bad("channels.unionpay.intermediate_cert_file", "must be set when the channel is enabled")
		}
		if strings.TrimSpace(u.SignerName) == "" {
			bad("channels.unionpay.signer_name", "must name the organisation UnionPay signs as (default 中国银联股份有限公司)")
		}
	}
}

// oneLine joins errors with "; " so a refusal at start is one line of the log.
type oneLine []error

func (e oneLine) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e oneLine) Unwrap() []error { return e }

// decodeMessage renders mapstructure's multi-line report as one line naming each key, e.g.
// "http has invalid keys: adress".
func decodeMessage(err error) string {
	var msgs []string
	var walk func(error)
	walk = func(err error) {
		if de, ok := err.(*mapstructure.DecodeError); ok {
			msgs = append(msgs, de.Name()+" "+de.Unwrap().Error())
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if u := errors.Unwrap(err); u != nil {
			walk(u)
			return
		}
		msgs = append(msgs, strings.Join(strings.Fields(err.Error()), " "))
	}
	walk(err)
	return strings.Join(msgs, "; ")
}

func (c *Config) validateRedis(bad func(key, format string, args ...any)) {
	r := c.Redis
	if r.Addr != "" && len(r.Addrs) > 0 {
		bad("redis.addr", "and redis.addrs are both set: list every address in redis.addrs")
	}
	for _, a := range r.Endpoints() {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			bad("redis.addrs", "must be host:port addresses, got %q", a)
		}
	}
	if r.DB < 0 || r.DB > 15 {
		bad("redis.db", "must be between 0 and 15, got %d", r.DB)
	}
	switch r.Mode {
	case "single":
		if len(r.Addrs) > 1 {
			bad("redis.addrs", "must hold one address in single mode, got %d (set redis.mode to cluster or sentinel)", len(r.Addrs))
		}
	case "cluster":
		if r.Addr != "" {
			bad("redis.addr", "is for single mode: list the cluster's seed nodes in redis.addrs")
		}
		if len(r.Addrs) == 0 {
			bad("redis.addrs", "must list at least one node of the cluster")
		}
		if r.DB != 0 {
			bad("redis.db", "must be 0 in cluster mode (a Redis Cluster has only database 0), got %d", r.DB)
		}
	case "sentinel":
		if r.Addr != "" {
			bad("redis.addr", "is for single mode: list the Sentinels in redis.addrs")
		}
		if len(r.Addrs) == 0 {
			bad("redis.addrs", "must list at least one Sentinel")
		}
		if r.MasterName == "" {
			bad("redis.master_name", "must name the master the Sentinels watch in sentinel mode")
		}
	default:
		bad("redis.mode", "must be single, cluster or sentinel, got %q", r.Mode)
	}
	if r.MasterName != "" && r.Mode != "sentinel" {
		bad("redis.master_name", "is only for sentinel mode (redis.mode is %q)", r.Mode)
	}
}

// Masked renders the effective configuration for the start-up log with every secret hidden.
func (c *Config) Masked() string {
	m := *c
	m.MySQL.DSN = maskDSN(c.MySQL.DSN)
	if m.Redis.Password != "" {
		m.Redis.Password = "***"
	}
	m.Auth.APITokens = make([]APIToken, len(c.Auth.APITokens))
	for i, t := range c.Auth.APITokens {
		m.Auth.APITokens[i] = APIToken{Name: t.Name, TokenFile: t.TokenFile, Roles: t.Roles}
		if t.Token != "" {
			m.Auth.APITokens[i].Token = "***"
		}
		if t.TokenSHA256 != "" {
			m.Auth.APITokens[i].TokenSHA256 = "***"
		}
	}
	if m.Channels.WeChatPay.APIv3Key != "" {
		m.Channels.WeChatPay.APIv3Key = "***"
	}
	m.Channels.Stripe.WebhookSecrets = make([]string, len(c.Channels.Stripe.WebhookSecrets))
	for i := range m.Channels.Stripe.WebhookSecrets {
		m.Channels.Stripe.WebhookSecrets[i] = "***"
	}
	if m.Channels.Alipay.AlipayPublicKey != "" {
		m.Channels.Alipay.AlipayPublicKey = "(inline PEM)"
	}
	if m.Channels.Stripe.APIKey != "" {
		m.Channels.Stripe.APIKey = "***"
	}
	if m.Channels.UnionPay.SignCertPassword != "" {
		m.Channels.UnionPay.SignCertPassword = "***"
	}
	maskWebhooks(&m)
	b, _ := json.Marshal(byKey(reflect.ValueOf(m))) // maps of plain values: cannot fail
	return string(b)
}

// byKey turns the config into maps keyed by the YAML names users write, durations as "10s".
func byKey(v reflect.Value) any {
	switch {
	case v.Type() == reflect.TypeOf(time.Duration(0)):
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Struct:
		out := map[string]any{}
		for i := 0; i < v.NumField(); i++ {
			if !v.Type().Field(i).IsExported() {
				continue // what was read from a file (a token): never printed
			}
			out[v.Type().Field(i).Tag.Get("koanf")] = byKey(v.Field(i))
		}
		return out
	case v.Kind() == reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = byKey(v.Index(i))
		}
		return out
	}
	return v.Interface()
}

func maskDSN(s string) string {
	d, err := mysql.ParseDSN(s)
	if err != nil {
		return "(invalid)"
	}
	if d.Passwd != "" {
		d.Passwd = "***"
	}
	return d.FormatDSN()
}

func (c *Config) validateReconcile(bad func(key, format string, args ...any)) {
	r := c.Reconcile
	if r.QueryInterval < 0 || r.QueryInterval > 0 && r.QueryInterval < time.Second {
		bad("reconcile.query_interval", "must be 0 (off) or at least 1s, got %s", r.QueryInterval)
	}
	if r.QueryAfter < 0 {
		bad("reconcile.query_after", "must not be negative, got %s", r.QueryAfter)
	}
	if r.QueryMaxAge <= r.QueryAfter {
		bad("reconcile.query_max_age", "must be longer than reconcile.query_after, got %s", r.QueryMaxAge)
	}
	if r.QPS < 1 || r.QPS > 1000 {
		bad("reconcile.qps", "must be between 1 and 1000, got %d", r.QPS)
	}
	if _, err := time.LoadLocation(r.StripeTimezone); err != nil || r.StripeTimezone == "" {
		bad("reconcile.stripe_timezone", "must be an IANA time zone such as UTC or America/New_York, got %q", r.StripeTimezone)
	}
	if r.LocalOnlyGrace < time.Hour {
		bad("reconcile.local_only_grace", "must be at least 1h, got %s", r.LocalOnlyGrace)
	}
	if _, _, ok := r.BillAtClock(); !ok {
		bad("reconcile.bill_at", "must be HH:MM (00:00 to 23:59), got %q", r.BillAt)
	}
	for key, u := range map[string]string{
		"channels.alipay.gateway_url":     c.Channels.Alipay.GatewayURL,
		"channels.wechatpay.api_base_url": c.Channels.WeChatPay.APIBaseURL,
		"channels.stripe.api_base_url":    c.Channels.Stripe.APIBaseURL,
		"channels.unionpay.query_url":     c.Channels.UnionPay.QueryURL,
	} {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			bad(key, "must be an http(s) URL")
		}
	}
	if k := c.Channels.Stripe.APIKey; k != "" && !strings.HasPrefix(k, "sk_") && !strings.HasPrefix(k, "rk_") {
		bad("channels.stripe.api_key", "must start with sk_ or rk_")
	}
}
