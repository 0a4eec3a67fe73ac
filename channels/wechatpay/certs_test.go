package wechatpay

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/simulate"
)

// certSandbox is a set of sandbox keys with the fake channel serving them over HTTP, and a
// gateway configuration in certificate mode that trusts the sandbox's platform certificate only.
// The fake also serves rotated, a platform certificate of another key (as WeChat serves a new
// certificate before it signs with it); stranger is a platform certificate it never serves.
type certSandbox struct {
	man      simulate.Manifest
	fake     *simulate.Fake
	cfg      config.WeChatPay // certificate mode; the merchant credentials; api_base_url at the fake
	platform testPlatformCert // the sandbox's: its key is the fake's platform key
	rotated  testPlatformCert
	stranger testPlatformCert
	served   string // the fake's platform certificate file
}

type testPlatformCert struct {
	cert   *x509.Certificate
	key    *rsa.PrivateKey
	serial string
}

func newCertSandbox(t *testing.T) *certSandbox {
	t.Helper()
	dir := t.TempDir()
	man, fake, srv := channeltest.ServeFake(t, dir, time.Now())
	s := &certSandbox{man: man, fake: fake}

	served := filepath.Join(dir, man.WeChatPay.PlatformCertFile)
	b, err := os.ReadFile(served)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := channels.ParseCertificates(b)
	if err != nil || len(certs) != 1 {
		t.Fatalf("the sandbox's platform certificate file: %d certificates, %v", len(certs), err)
	}
	s.platform = testPlatformCert{cert: certs[0], serial: fmtSerial(certs[0])}
	// The gateway trusts a copy: the fake's file grows below.
	trusted := filepath.Join(t.TempDir(), "platform.pem")
	if err := os.WriteFile(trusted, b, 0o600); err != nil {
		t.Fatal(err)
	}

	s.served = served
	s.rotated = newTestPlatformCert(t, time.Now().Add(time.Minute)) // the newest
	s.stranger = newTestPlatformCert(t, time.Now())
	s.serve(t, s.rotated)

	w := man.WeChatPay
	s.cfg = config.WeChatPay{
		Enabled: true, MchID: w.MchID, AppID: w.AppID, APIv3Key: w.APIv3Key,
		PlatformCertificateFiles: []string{trusted},
		MerchantPrivateKeyFile:   filepath.Join(dir, w.MerchantPrivateKeyFile), MerchantSerialNo: w.MerchantSerialNo,
		APIBaseURL: srv.URL,
	}
	return s
}

// serve makes the fake serve c from now on.
func (s *certSandbox) serve(t *testing.T, c testPlatformCert) {
	t.Helper()
	f, err := os.OpenFile(s.served, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func newTestPlatformCert(t *testing.T, notBefore time.Time) testPlatformCert {
	t.Helper()
	key := testenv.NewRSAKey(t)
	cert, err := simulate.NewWeChatPlatformCertificate(key, notBefore.Add(time.Hour)) // valid from notBefore
	if err != nil {
		t.Fatal(err)
	}
	return testPlatformCert{cert: cert, key: key, serial: fmtSerial(cert)}
}

func fmtSerial(c *x509.Certificate) string { return utils.GetCertificateSerialNumber(*c) }

// verifier builds the gateway's WeChat Pay channel from s.cfg, as serve does.
func (s *certSandbox) verifier(t *testing.T, cfg config.WeChatPay) *Channel {
	t.Helper()
	ch, err := FromConfig(cfg)
	if err != nil {
		t.Fatalf("FromConfig: %v", err)
	}
	return ch
}

// refresher builds the verifier's refresher; a notification waits up to 10 s for a download
// (a slow race-detector run must not make it give up).
func (s *certSandbox) refresher(t *testing.T, w *Channel, report func([]string, error)) *Certificates {
	t.Helper()
	r, err := NewCertificates(s.cfg, w, nil, report)
	if err != nil {
		t.Fatal(err)
	}
	r.wait = 10 * time.Second
	return r
}

// notify is a payment notification signed with c's key under c's serial, now.
func (s *certSandbox) notify(t *testing.T, c testPlatformCert, tradeNo string) simulate.Message {
	t.Helper()
	w := s.man.WeChatPay
	key := c.key
	if key == nil {
		t.Fatal("no key for this certificate in the test")
	}
	m, err := simulate.WeChatPaySigner{MchID: w.MchID, AppID: w.AppID, APIv3Key: w.APIv3Key, Serial: c.serial, Key: key}.
		Sign(simulate.Payment{TradeNo: tradeNo, AmountFen: 1234})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func verifyNotice(w *Channel, m simulate.Message, tradeNo string) error {
	ev, err := w.Verify(m.Body, m.Header, time.Now())
	if err == nil && (ev.TradeNo != tradeNo || ev.AmountFen != 1234) {
		return errors.New("verified, but the event is about " + ev.TradeNo)
	}
	return err
}

// TestWeChatCertificatesRotation: a notification signed by a platform certificate the gateway
// did not start with is refused, then accepted once a refresh downloaded it from the fake; the
// download is the SDK's, signed by the platform certificate trusted at start.
func TestWeChatCertificatesRotation(t *testing.T) {
	s := newCertSandbox(t)
	w := s.verifier(t, s.cfg)
	if !w.CertificateMode() {
		t.Fatal("a verifier with platform_certificate_files is not in certificate mode")
	}
	tradeNo := channeltest.NewTradeNo("WCR")
	m := s.notify(t, s.rotated, tradeNo)

	// No refresher yet: refused, and nothing was downloaded.
	if err := verifyNotice(w, m, tradeNo); !errors.Is(err, channels.ErrBadSignature) {
		t.Fatalf("before a refresh: %v, want ErrBadSignature", err)
	}
	if n := s.fake.WeChatCertificateDownloads(); n != 0 {
		t.Fatalf("%d downloads without a refresher", n)
	}

	type report struct {
		added []string
		err   error
	}
	reports := make(chan report, 4)
	r := s.refresher(t, w, func(added []string, err error) { reports <- report{added, err} })
	added, err := r.Refresh(context.Background())
	if err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	// The platform certificate was trusted already; the rotated one is new.
	if !slices.Equal(added, []string{s.rotated.serial}) {
		t.Fatalf("added %v, want [%s]", added, s.rotated.serial)
	}
	if got := <-reports; got.err != nil || !slices.Equal(got.added, added) {
		t.Errorf("reported %v, %v; want %v", got.added, got.err, added)
	}
	if n := s.fake.WeChatCertificateDownloads(); n != 1 {
		t.Fatalf("%d downloads, want 1", n)
	}
	if err := verifyNotice(w, m, tradeNo); err != nil {
		t.Fatalf("after the refresh: %v", err)
	}
	pm := s.notify(t, testPlatformCert{key: s.platformKey(t), serial: s.platform.serial}, tradeNo)
	if err := verifyNotice(w, pm, tradeNo); err != nil {
		t.Fatalf("the platform certificate trusted at start: %v", err)
	}
	if n := s.fake.WeChatCertificateDownloads(); n != 1 {
		t.Errorf("%d downloads, want still 1: known serials download nothing", n)
	}

	// A second refresh finds nothing new.
	if added, err := r.Refresh(context.Background()); err != nil || len(added) != 0 {
		t.Fatalf("second Refresh: added %v, %v", added, err)
	}

	// The trade query in certificate mode: it asks for answers signed with the newest
	// certificate (the rotated one); the fake signs with the one it holds the key of, which the
	// gateway trusts too.
	q, err := NewQuerier(s.cfg, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := s.fake.Add(context.Background(), simulate.FakeTrade{Channel: "wechatpay", TradeNo: channeltest.NewTradeNo("WCQ"), AmountFen: 500, Status: simulate.FakePaid})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := q.QueryTrade(context.Background(), channels.TradeQuery{TradeNo: tr.TradeNo}); err != nil || a.State != channels.TradePaid {
		t.Fatalf("query in certificate mode: %v %v", a.State, err)
	}
}

// platformKey reads the fake's platform private key from the sandbox.
func (s *certSandbox) platformKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	return channeltest.ReadKeyFile(t, filepath.Join(filepath.Dir(s.cfg.MerchantPrivateKeyFile), s.man.WeChatPay.PrivateKeyFile))
}

// TestWeChatCertificatesUnknownSerial: a notification with an unknown serial gets one download
// before it is refused; at most one download a minute; concurrent ones share one.
func TestWeChatCertificatesUnknownSerial(t *testing.T) {
	s := newCertSandbox(t)
	downloads := func(t *testing.T, before, want int) {
		t.Helper()
		if n := s.fake.WeChatCertificateDownloads() - before; n != want {
			t.Errorf("%d downloads, want %d", n, want)
		}
	}

	t.Run("served by the channel", func(t *testing.T) {
		w := s.verifier(t, s.cfg)
		s.refresher(t, w, nil)
		before := s.fake.WeChatCertificateDownloads()
		tradeNo := channeltest.NewTradeNo("WCU")
		if err := verifyNotice(w, s.notify(t, s.rotated, tradeNo), tradeNo); err != nil {
			t.Fatalf("unknown serial the channel serves: %v", err)
		}
		downloads(t, before, 1)
		if err := verifyNotice(w, s.notify(t, s.rotated, tradeNo), tradeNo); err != nil {
			t.Fatalf("the same serial again: %v", err)
		}
		downloads(t, before, 1)
	})

	t.Run("not served, then rate-limited", func(t *testing.T) {
		w := s.verifier(t, s.cfg)
		r := s.refresher(t, w, nil)
		before := s.fake.WeChatCertificateDownloads()
		tradeNo := channeltest.NewTradeNo("WCS")
		if err := verifyNotice(w, s.notify(t, s.stranger, tradeNo), tradeNo); !errors.Is(err, channels.ErrBadSignature) {
			t.Fatalf("a serial the channel does not serve: %v, want ErrBadSignature", err)
		}
		downloads(t, before, 1)

		// Within the minute, another unknown serial downloads nothing: even one the channel
		// serves from now on is refused.
		later := newTestPlatformCert(t, time.Now())
		s.serve(t, later)
		m := s.notify(t, later, tradeNo)
		if err := verifyNotice(w, m, tradeNo); !errors.Is(err, channels.ErrBadSignature) {
			t.Fatalf("second unknown serial within the minute: %v, want ErrBadSignature", err)
		}
		downloads(t, before, 1)

		// A minute later, it gets its download.
		r.mu.Lock()
		r.last = r.last.Add(-wechatRefreshGap)
		r.mu.Unlock()
		if err := verifyNotice(w, m, tradeNo); err != nil {
			t.Fatalf("after the minute: %v", err)
		}
		downloads(t, before, 2)
	})

	t.Run("concurrent notifications", func(t *testing.T) {
		w := s.verifier(t, s.cfg)
		s.refresher(t, w, nil)
		before := s.fake.WeChatCertificateDownloads()
		const n = 16
		msgs := make([]simulate.Message, n)
		trades := make([]string, n)
		for i := range msgs {
			trades[i] = channeltest.NewTradeNo("WCC")
			msgs[i] = s.notify(t, s.rotated, trades[i])
		}
		errs := make([]error, n)
		testenv.AtOnce(n, func(i int) { errs[i] = verifyNotice(w, msgs[i], trades[i]) })
		for i, err := range errs {
			if err != nil {
				t.Errorf("notification %d: %v", i, err)
			}
		}
		downloads(t, before, 1)
	})
}

// TestWeChatCertificatesRefused: a download adds nothing unless a platform key trusted already
// signed it and the APIv3 key decrypts it; its errors carry no key material.
func TestWeChatCertificatesRefused(t *testing.T) {
	s := newCertSandbox(t)
	refused := func(t *testing.T, w *Channel, cfg config.WeChatPay, want error) {
		t.Helper()
		reported := make(chan error, 1)
		r, err := NewCertificates(cfg, w, nil, func(_ []string, err error) { reported <- err })
		if err != nil {
			t.Fatal(err)
		}
		added, err := r.Refresh(context.Background())
		if !errors.Is(err, want) || len(added) != 0 {
			t.Fatalf("Refresh: added %v, %v; want %v", added, err, want)
		}
		for _, secret := range []string{s.cfg.APIv3Key, cfg.APIv3Key, "PRIVATE KEY", "CERTIFICATE", "-----"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes %q: %v", secret, err)
			}
		}
		if w.knownSerial(s.rotated.serial) {
			t.Error("the rotated certificate is trusted after a refused download")
		}
		select {
		case rerr := <-reported:
			if rerr == nil || rerr.Error() != err.Error() {
				t.Errorf("reported %v, want %v", rerr, err)
			}
		case <-time.After(5 * time.Second):
			t.Error("the failed download was not reported")
		}
	}

	t.Run("signature tampered with", func(t *testing.T) {
		s.fake.Break("wechatpay", true)
		defer s.fake.Break("wechatpay", false)
		refused(t, s.verifier(t, s.cfg), s.cfg, channels.ErrBadSignature)
	})
	t.Run("signed by a key not trusted yet", func(t *testing.T) {
		// A gateway trusting the stranger certificate only: the list, signed with the sandbox's
		// platform certificate, proves nothing to it.
		dir := t.TempDir()
		f := filepath.Join(dir, "stranger.pem")
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.stranger.cert.Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := s.cfg
		cfg.PlatformCertificateFiles = []string{f}
		refused(t, s.verifier(t, cfg), cfg, channels.ErrBadSignature)
	})
	t.Run("another APIv3 key", func(t *testing.T) {
		cfg := s.cfg
		cfg.APIv3Key = strings.Repeat("k", 32)
		refused(t, s.verifier(t, cfg), cfg, channels.ErrMalformed)
	})
	t.Run("channel unreachable", func(t *testing.T) {
		srv := httptest.NewServer(nil)
		srv.Close()
		cfg := s.cfg
		cfg.APIBaseURL = srv.URL
		refused(t, s.verifier(t, cfg), cfg, channels.ErrQueryFailed)
	})
	t.Run("merchant credentials wrong", func(t *testing.T) {
		// The fake refuses the Authorization (401 SIGN_ERROR): an HTTP error, nothing added.
		cfg := s.cfg
		cfg.MerchantSerialNo = strings.Repeat("0", 40)
		refused(t, s.verifier(t, cfg), cfg, channels.ErrQueryFailed)
	})
}

// TestNewWeChatCertificates: public-key mode downloads nothing; missing merchant credentials are
// channels.ErrNoCredentials naming the key.
func TestNewWeChatCertificates(t *testing.T) {
	s := testQuerySandbox(t) // public-key mode, as simulate keys generates it
	pub := s.Channels["wechatpay"].(*Channel)
	if pub.CertificateMode() {
		t.Fatal("a public-key verifier is in certificate mode")
	}
	if _, err := NewCertificates(s.Cfg.Channels.WeChatPay, pub, nil, nil); err == nil || errors.Is(err, channels.ErrNoCredentials) {
		t.Fatalf("public-key mode: %v, want a refusal", err)
	}
	if pub.refresher.Load() != nil {
		t.Fatal("a refresher was set on a public-key verifier")
	}

	cs := newCertSandbox(t)
	w := cs.verifier(t, cs.cfg)
	for key, cfg := range map[string]config.WeChatPay{
		"merchant_private_key_file": func() config.WeChatPay { c := cs.cfg; c.MerchantPrivateKeyFile = ""; return c }(),
		"merchant_serial_no":        func() config.WeChatPay { c := cs.cfg; c.MerchantSerialNo = ""; return c }(),
	} {
		if _, err := NewCertificates(cfg, w, nil, nil); !errors.Is(err, channels.ErrNoCredentials) || !strings.Contains(err.Error(), key) {
			t.Errorf("without %s: %v", key, err)
		}
	}
	if w.refresher.Load() != nil {
		t.Error("a refresher was set without merchant credentials")
	}
}
