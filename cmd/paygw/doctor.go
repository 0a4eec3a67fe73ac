package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/alipay"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/channels/unionpay"
	"github.com/paygw/paygw/channels/wechatpay"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// errDoctorFailed: at least one check failed; the checklist on stdout says which.
var errDoctorFailed = errors.New("doctor: a check failed (see the FAIL lines)")

// maxClockSkew is the most the host's clock may differ from MySQL's: WeChat Pay's and Stripe's
// timestamp windows are 300 s, and the leases and the sweeper go by the database's clock.
const maxClockSkew = 60 * time.Second

// checklist records one line per check: "ok", "WARN", "FAIL" or "skip", the check's name, the
// detail; it prints each as it comes unless the output is JSON.
type checklist struct {
	w      io.Writer // nil: print nothing
	checks []check
	failed int
}

// check is one line of the checklist.
type check struct {
	Status string `json:"status"` // ok, WARN, FAIL or skip
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

func (c *checklist) ok(name, format string, args ...any) { c.line("ok", name, format, args...) }
func (c *checklist) skip(name, format string, args ...any) {
	c.line("skip", name, format, args...)
}

// warn is a line that does not fail the run: something an operator should look at.
func (c *checklist) warn(name, format string, args ...any) { c.line("WARN", name, format, args...) }

func (c *checklist) fail(name, format string, args ...any) {
	c.failed++
	c.line("FAIL", name, format, args...)
}

func (c *checklist) line(status, name, format string, args ...any) {
	ch := check{Status: status, Name: name, Detail: fmt.Sprintf(format, args...)}
	c.checks = append(c.checks, ch)
	if c.w != nil {
		fmt.Fprintf(c.w, "%-4s %s: %s\n", ch.Status, ch.Name, ch.Detail)
	}
}

func (a *app) doctorCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "doctor",
		Short: "check a deployment before going live: a checklist, exit 1 on a failure",
		Long: `Check the config, the keys and certificates, MySQL (migrations, session, clock), Redis, the
notify routes of the running serve (a self-signed probe each must refuse) and, with outbound
credentials, one trade query per channel, and each webhook endpoint (secrets, reachable, a WARN for
plain http to another host): one line per check, ok, WARN, FAIL or skip.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	path := configFlag(c)
	noProbe := c.Flags().Bool("no-probe", false, "do not send the self-signed probes to the running serve's notify routes")
	asJSON := jsonFlag(c)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.doctor(cmd.Context(), config.Path(*path), !*noProbe, *asJSON)
	}
	return c
}

// doctor runs the checklist of the config file at path.
func (a *app) doctor(ctx context.Context, file string, probe, asJSON bool) error {
	c := &checklist{w: a.stdout}
	if asJSON {
		c.w = nil
	}
	if cfg, err := config.Load(file, os.Environ()); err != nil {
		c.fail("config", "%s: %v", file, err)
	} else {
		c.ok("config", "%s parses and validates", file)
		doctor(ctx, cfg, c, probe)
	}
	if asJSON {
		if err := writeJSON(a.stdout, struct {
			OK     bool    `json:"ok"`
			Failed int     `json:"failed"`
			Checks []check `json:"checks"`
		}{c.failed == 0, c.failed, c.checks}); err != nil {
			return err
		}
	}
	if c.failed > 0 {
		return errDoctorFailed
	}
	return nil
}

func doctor(ctx context.Context, cfg *config.Config, c *checklist, probe bool) {
	doctorSecrets(cfg, c)
	doctorKeys(cfg, c)
	chs, err := all.FromConfig(cfg.Channels)
	if err != nil {
		c.fail("channels", "%v", err)
	} else {
		names := make([]string, len(chs))
		for i, ch := range chs {
			names[i] = ch.Name()
		}
		if len(names) == 0 {
			c.fail("channels", "no channel is enabled: every notification would be refused")
		} else {
			c.ok("channels", "enabled and built: %s", strings.Join(names, ", "))
		}
		doctorChain(chs, c)
	}
	doctorMySQL(ctx, cfg, c)
	doctorRedis(ctx, cfg, c)
	switch {
	case !probe:
		c.skip("notify probes", "--no-probe")
	case err != nil:
		c.skip("notify probes", "the channels do not build")
	default:
		doctorProbes(ctx, cfg, chs, c)
	}
	if err == nil {
		doctorQueries(ctx, cfg, chs, c)
	}
	doctorWebhooks(ctx, cfg, c)
}

// doctorTokens names each API client, how its token is given and its roles; never the token.
func doctorTokens(cfg *config.Config, c *checklist) {
	for _, t := range cfg.Auth.APITokens {
		how := "token"
		switch {
		case t.TokenSHA256 != "":
			how = "token_sha256"
		case t.TokenFile != "":
			how = "token_file " + t.TokenFile
		}
		roles := make([]string, 0, len(t.Roles))
		for _, r := range t.RoleList() {
			roles = append(roles, string(r))
		}
		if t.Legacy() {
			c.warn("token "+t.Name, "by %s, no roles: works as admin", how)
			continue
		}
		c.ok("token "+t.Name, "by %s, roles %s", how, strings.Join(roles, ", "))
	}
}

// doctorSecrets: the secrets each enabled channel verifies with are present (Load refused the
// malformed ones), and /v1 has a client.
func doctorSecrets(cfg *config.Config, c *checklist) {
	if len(cfg.Auth.APITokens) == 0 {
		c.fail("secrets auth", "auth.api_tokens is empty: every /v1 request would be refused")
	} else {
		c.ok("secrets auth", "%d API client(s)", len(cfg.Auth.APITokens))
	}
	doctorTokens(cfg, c)
	ch := cfg.Channels
	if ch.Alipay.Enabled {
		c.ok("secrets alipay", "app_id %s and the Alipay public key are set", ch.Alipay.AppID)
	}
	if w := ch.WeChatPay; w.Enabled {
		c.ok("secrets wechatpay", "mch_id %s, the 32-byte api_v3_key and the platform key are set", w.MchID)
	}
	if s := ch.Stripe; s.Enabled {
		c.ok("secrets stripe", "%d webhook secret(s)", len(s.WebhookSecrets))
	}
	if u := ch.UnionPay; u.Enabled {
		if u.SignCertFile != "" && u.SignCertPassword == "" {
			c.fail("secrets unionpay", "channels.unionpay.sign_cert_password is empty while sign_cert_file is set")
		} else {
			c.ok("secrets unionpay", "mer_id %s and the CA certificates are set", u.MerID)
		}
	}
}

// doctorKeys checks every key and certificate file one by one, so that one bad file does not
// hide the next.
func doctorKeys(cfg *config.Config, c *checklist) {
	ch := cfg.Channels
	now := time.Now()
	if a := ch.Alipay; a.Enabled {
		if a.AlipayPublicKeyFile != "" {
			publicKeyFile(c, "channels.alipay.alipay_public_key_file", a.AlipayPublicKeyFile, alipay.MinPublicKeyBits)
		} else {
			publicKeyText(c, "channels.alipay.alipay_public_key", "(inline)", a.AlipayPublicKey, alipay.MinPublicKeyBits)
		}
		if a.AppPrivateKeyFile != "" {
			privateKeyFile(c, "channels.alipay.app_private_key_file", a.AppPrivateKeyFile, alipay.MinPrivateKeyBits)
		}
	}
	if w := ch.WeChatPay; w.Enabled {
		if w.PlatformPublicKeyFile != "" {
			publicKeyFile(c, "channels.wechatpay.platform_public_key_file", w.PlatformPublicKeyFile, wechatpay.MinRSABits)
		}
		for i, f := range w.PlatformCertificateFiles {
			certificateFile(c, fmt.Sprintf("channels.wechatpay.platform_certificate_files[%d]", i), f, now, wechatpay.MinRSABits)
		}
		if w.MerchantPrivateKeyFile != "" {
			privateKeyFile(c, "channels.wechatpay.merchant_private_key_file", w.MerchantPrivateKeyFile, wechatpay.MinRSABits)
		}
	}
	if u := ch.UnionPay; u.Enabled {
		certificateFile(c, "channels.unionpay.root_cert_file", u.RootCertFile, now, unionpay.MinRSABits)
		certificateFile(c, "channels.unionpay.intermediate_cert_file", u.IntermediateCertFile, now, unionpay.MinRSABits)
		if u.SignCertFile != "" {
			pfxFile(c, "channels.unionpay.sign_cert_file", u.SignCertFile, u.SignCertPassword, now, unionpay.MinRSABits)
		}
	}
}

// readFile reads path for the check named name; a failure is reported under it.
func readFile(c *checklist, name, path string) ([]byte, bool) {
	b, err := os.ReadFile(path) // #nosec G304 -- the operator's own configuration
	if err != nil {
		c.fail(name, "%v", err)
		return nil, false
	}
	return b, true
}

// parseFile reads path and parses it, reporting either failure under the check named name.
func parseFile[T any](c *checklist, name, path string, parse func([]byte) (T, error)) (T, bool) {
	var zero T
	b, ok := readFile(c, name, path)
	if !ok {
		return zero, false
	}
	v, err := parse(b)
	if err != nil {
		c.fail(name, "%s: %v", path, err)
		return zero, false
	}
	return v, true
}

func publicKeyFile(c *checklist, key, path string, minBits int) {
	if b, ok := readFile(c, "key "+key, path); ok {
		publicKeyText(c, key, path, string(b), minBits)
	}
}

func publicKeyText(c *checklist, key, path, text string, minBits int) {
	if block, _ := pem.Decode([]byte(text)); block != nil && strings.Contains(block.Type, "PRIVATE") {
		c.fail("key "+key, "%s is a private key (%s): this setting takes the channel's public key", path, block.Type)
		return
	}
	pub, err := channels.ParseRSAPublicKey(text)
	if err != nil {
		c.fail("key "+key, "%s: %v", path, err)
		return
	}
	rsaSize(c, key, path, "public", pub, minBits)
}

func privateKeyFile(c *checklist, key, path string, minBits int) {
	if k, ok := parseFile(c, "key "+key, path, channels.ParsePrivateKey); ok {
		rsaSize(c, key, path, "private", &k.PublicKey, minBits)
	}
}

// rsaSize checks pub by the channel's own rule, minBits (the channel packages' MinRSABits...).
func rsaSize(c *checklist, key, path, kind string, pub *rsa.PublicKey, minBits int) {
	if bits := pub.N.BitLen(); channels.CheckRSAKey(pub, minBits) != nil {
		c.fail("key "+key, "%s: RSA %s key of %d bits, want at least %d", path, kind, bits, minBits)
	} else {
		c.ok("key "+key, "%s: RSA %s key, %d bits", path, kind, bits)
	}
}

func certificateFile(c *checklist, key, path string, now time.Time, minBits int) {
	certs, _ := parseFile(c, "cert "+key, path, channels.ParseCertificates) // none on a failure
	for _, cert := range certs {
		certificate(c, key, path, cert, now, minBits)
	}
}

func certificate(c *checklist, key, path string, cert *x509.Certificate, now time.Time, minBits int) {
	name := "cert " + key
	cn := strings.ToValidUTF8(cert.Subject.CommonName, "?")
	bits := 0
	if pub, ok := cert.PublicKey.(*rsa.PublicKey); ok {
		bits = pub.N.BitLen()
	}
	switch days := daysLeft(cert.NotAfter, now); {
	case now.Before(cert.NotBefore):
		c.fail(name, "%s: %q is not valid before %s", path, cn, cert.NotBefore.UTC().Format(time.RFC3339))
	case now.After(cert.NotAfter):
		c.fail(name, "%s: %q expired %d day(s) ago (%s)", path, cn, -days, cert.NotAfter.UTC().Format(time.RFC3339))
	case bits == 0:
		c.fail(name, "%s: %q holds a %T key, want RSA", path, cn, cert.PublicKey)
	case channels.CheckRSAKey(cert.PublicKey.(*rsa.PublicKey), minBits) != nil:
		c.fail(name, "%s: %q has an RSA key of %d bits, want at least %d", path, cn, bits, minBits)
	default:
		c.ok(name, "%s: %q, RSA %d bits, expires in %d day(s) (%s)", path, cn, bits, days, cert.NotAfter.UTC().Format("2006-01-02"))
	}
}

// daysLeft is whole days from now to t (negative once t has passed), rounded toward zero.
func daysLeft(t, now time.Time) int {
	return int(t.Sub(now).Hours() / 24)
}

func pfxFile(c *checklist, key, path, password string, now time.Time, minBits int) {
	b, ok := readFile(c, "key "+key, path)
	if !ok {
		return
	}
	k, leaf, err := unionpay.DecodePFX(b, password)
	if err != nil {
		c.fail("key "+key, "%s: %v", path, err)
		return
	}
	rsaSize(c, key, path, "private", &k.PublicKey, minBits)
	certificate(c, key, path, leaf, now, minBits)
}

// doctorChain reports the UnionPay chain as the channel trusts it, and WeChat Pay's mode.
func doctorChain(chs []channels.Channel, c *checklist) {
	now := time.Now()
	for _, ch := range chs {
		switch v := ch.(type) {
		case *unionpay.Channel:
			for _, cert := range v.Chain() {
				if now.After(cert.NotAfter) {
					c.fail("unionpay chain", "%s: expired", cert)
				} else {
					c.ok("unionpay chain", "%s %q %s, expires in %d day(s)", cert.Role, cert.CommonName, cert.SignatureAlgorithm, daysLeft(cert.NotAfter, now))
				}
			}
		case *wechatpay.Channel:
			mode := "public-key mode"
			if v.CertificateMode() {
				mode = "certificate mode (platform certificates followed while serve runs)"
			}
			c.ok("wechatpay mode", "%s", mode)
		}
	}
}

func doctorMySQL(ctx context.Context, cfg *config.Config, c *checklist) {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	db, err := repository.Open(octx, cfg.MySQL.DSN, 2)
	if err != nil {
		c.fail("mysql", "%v", err)
		c.skip("mysql migrations", "MySQL unreachable")
		c.skip("mysql session", "MySQL unreachable")
		c.skip("clock", "MySQL unreachable")
		return
	}
	defer db.Close()
	s, err := db.Session(octx)
	if err != nil {
		c.fail("mysql", "reading the session: %v", err)
		return
	}
	c.ok("mysql", "reachable, server %s", s.Version)
	if list, err := db.MigrationStatus(octx); err != nil {
		c.fail("mysql migrations", "%v", err)
	} else {
		var pending []string
		for _, m := range list {
			if m.State != "applied" {
				pending = append(pending, fmt.Sprintf("%05d", m.Source.Version))
			}
		}
		if len(pending) > 0 {
			c.fail("mysql migrations", "%d pending (%s): run `paygw migrate`", len(pending), strings.Join(pending, ", "))
		} else {
			c.ok("mysql migrations", "all %d applied", len(list))
		}
	}
	if s.Isolation != repository.Isolation || s.LockWaitTimeout != repository.LockWaitTimeout {
		c.fail("mysql session", "isolation %s, innodb_lock_wait_timeout %d s; want %s and %d s (a server or proxy overrides paygw's session settings)",
			s.Isolation, s.LockWaitTimeout, repository.Isolation, repository.LockWaitTimeout)
	} else {
		c.ok("mysql session", "isolation %s, innodb_lock_wait_timeout %d s", s.Isolation, s.LockWaitTimeout)
	}
	skew := time.Since(s.Now)
	if skew.Abs() > maxClockSkew {
		c.fail("clock", "this host is %s off MySQL's clock, more than %s: channel timestamps and leases go wrong", skew.Round(time.Millisecond), maxClockSkew)
	} else {
		c.ok("clock", "within %s of MySQL's (at most %s allowed)", skew.Abs().Round(time.Millisecond), maxClockSkew)
	}
}

func doctorRedis(ctx context.Context, cfg *config.Config, c *checklist) {
	redis.SetLogger(guard.LibraryLogger(zerolog.Nop())) // the check's line says what failed
	o := guardOptions(cfg.Redis, nil)
	where := strings.Join(o.Addrs, ",")
	if o.Mode != guard.ModeSingle {
		where = o.Mode + " " + where // a Redis Cluster's seeds or the Sentinels
	}
	rc := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: o.Addrs, MasterName: o.MasterName,
		IsClusterMode: o.Mode == guard.ModeCluster, Password: o.Password, DB: o.DB,
		DialTimeout: 3 * time.Second, ReadTimeout: 3 * time.Second, MaxRetries: -1})
	defer rc.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rc.Ping(pctx).Err(); err != nil {
		c.fail("redis", "%s: %v (serve runs on MySQL alone, slower, until it answers)", where, err)
		return
	}
	c.ok("redis", "%s answers", where)
}

// doctorProbes sends each enabled channel's notify route a notification signed with a key made
// up for the probe: a gateway that verifies refuses it.
func doctorProbes(ctx context.Context, cfg *config.Config, chs []channels.Channel, c *checklist) {
	base := "http://" + localAddr(cfg.HTTP.Addr)
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, ch := range chs {
		name := "probe " + ch.Name()
		m, err := probeMessage(cfg, ch.Name())
		if err != nil {
			c.fail(name, "building the probe: %v", err)
			continue
		}
		url := simulate.NotifyURL(base, ch.Name())
		r := simulate.Send(ctx, hc, url, m)
		switch r.Kind() {
		case "refusal":
			c.ok(name, "%s refused a self-signed notification (%d): verification is on", url, r.Status)
		case "error":
			c.fail(name, "no paygw serve answers at %s (http.addr): %v; start serve first, or pass --no-probe", url, r.Err)
		case "success":
			c.fail(name, "%s ACCEPTED a notification signed with a made-up key (%d): verification is off or the wrong key is trusted", url, r.Status)
		default:
			c.fail(name, "%s answered %d %q, want a refusal: the gateway is not ready", url, r.Status, r.Body)
		}
	}
}

// localAddr turns a listen address into one to dial: an empty or wildcard host is loopback.
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// probeMessage is a payment of an order that cannot exist, in the channel's own format and with
// the configured identities, signed with a fresh key (or secret) nobody trusts.
func probeMessage(cfg *config.Config, channel string) (simulate.Message, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	p := simulate.Payment{TradeNo: "PDOCTOR" + strings.ToUpper(hex.EncodeToString(rnd[:])), AmountFen: 1}
	if channel == "stripe" {
		return simulate.StripeSigner{Secret: "whsec_doctor" + hex.EncodeToString(rnd[:])}.Sign(p)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return simulate.Message{}, err
	}
	ch := cfg.Channels
	switch channel {
	case "alipay":
		return simulate.AlipaySigner{AppID: ch.Alipay.AppID, SellerID: ch.Alipay.SellerID, Key: key}.Sign(p)
	case "wechatpay":
		appID := ch.WeChatPay.AppID
		if appID == "" && len(ch.WeChatPay.AppIDs) > 0 {
			appID = ch.WeChatPay.AppIDs[0]
		}
		serial := ch.WeChatPay.PlatformPublicKeyID
		if serial == "" && len(ch.WeChatPay.PlatformCertificateFiles) > 0 {
			// A serial the gateway knows, so that the probe tests the signature, not the
			// download of an unknown certificate.
			if b, err := os.ReadFile(ch.WeChatPay.PlatformCertificateFiles[0]); err == nil {
				if certs, err := channels.ParseCertificates(b); err == nil {
					serial = utils.GetCertificateSerialNumber(*certs[0])
				}
			}
		}
		return simulate.WeChatPaySigner{MchID: ch.WeChatPay.MchID, AppID: appID, APIv3Key: ch.WeChatPay.APIv3Key, Serial: serial, Key: key}.Sign(p)
	case "unionpay":
		sb, err := simulate.NewUnionPaySandbox(time.Now())
		if err != nil {
			return simulate.Message{}, err
		}
		return sb.Signer(ch.UnionPay.MerID).Sign(p)
	}
	return simulate.Message{}, fmt.Errorf("no probe for channel %q", channel)
}

// doctorQueries makes one read-only call per channel with outbound credentials: a trade query
// of an order that cannot exist, whose verified answer is "not paid".
func doctorQueries(ctx context.Context, cfg *config.Config, chs []channels.Channel, c *checklist) {
	qs, skipped, err := all.QueriersFromConfig(cfg.Channels, chs, &http.Client{Timeout: outboundTimeout})
	if err != nil {
		c.fail("query", "%v", err)
		return
	}
	for _, s := range skipped {
		c.skip("query", "%v", s)
	}
	for _, q := range qs {
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		tradeNo := "PDOCTOR" + strings.ToUpper(hex.EncodeToString(rnd[:]))
		qctx, cancel := context.WithTimeout(ctx, outboundTimeout)
		a, err := q.QueryTrade(qctx, channels.TradeQuery{TradeNo: tradeNo, OrderTime: time.Now()})
		cancel()
		name := "query " + q.Name()
		switch {
		case err != nil:
			c.fail(name, "asking about %s: %v", tradeNo, err)
		case a.State != channels.TradeNotPaid:
			c.fail(name, "the channel says %s (%s) of %s, an order that cannot exist: is this the right merchant account?", a.State, a.Status, tradeNo)
		default:
			c.ok(name, "verified answer for an unknown order: %s (%s)", a.State, a.Status)
		}
	}
}
