package wechatpay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
)

// A TRANSACTION.SUCCESS notification WeChat Pay sent, with the platform public key that signed it
// (testdata/vectors/README.md gives the source). Its APIv3 key was never published, so its
// resource cannot be decrypted: Verify gets past the signature and stops at decryption, which is
// how these tests see that the signature held.

const wechatCapture = "vectors/02_node-wxpay_2021_transaction_notify"

type wechatCaptured struct {
	body   []byte
	header http.Header
	at     time.Time // Wechatpay-Timestamp
	w      *Channel
}

func loadWeChatCapture(tb testing.TB) wechatCaptured {
	tb.Helper()
	var c wechatCaptured
	c.body = []byte(channeltest.ReadTestFile(tb, wechatCapture+".body.json"))
	var h map[string]string
	if err := json.Unmarshal([]byte(channeltest.ReadTestFile(tb, wechatCapture+".headers.json")), &h); err != nil {
		tb.Fatal(err)
	}
	c.header = http.Header{}
	for k, v := range h {
		c.header.Set(k, v)
	}
	ts, err := strconv.ParseInt(c.header.Get("Wechatpay-Timestamp"), 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	c.at = time.Unix(ts, 0)
	key, err := channels.ParseRSAPublicKey(channeltest.ReadTestFile(tb, wechatCapture+".platform_public_key.pem"))
	if err != nil {
		tb.Fatal(err)
	}
	// The key's id is the Wechatpay-Serial WeChat sent with it; the merchant ids are ours, not
	// the capture's, and are never reached.
	if c.w, err = New(Config{MchID: wechatTestMchID, AppID: wechatTestAppID, APIv3Key: wechatTestAPIv3Key,
		PublicKeyID: c.header.Get("Wechatpay-Serial"), PublicKey: key}); err != nil {
		tb.Fatal(err)
	}
	return c
}

// wantDecryptFailure: the signature held, and only the resource's decryption failed.
func wantDecryptFailure(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, channels.ErrMalformed) || errors.Is(err, channels.ErrBadSignature) || errors.Is(err, channels.ErrStale) ||
		!strings.Contains(err.Error(), "resource does not decrypt") {
		t.Fatalf("err = %v, want the decryption failure that follows a good signature", err)
	}
}

func TestWeChatPayCapture(t *testing.T) {
	c := loadWeChatCapture(t)
	if got := c.at.UTC().Format(time.RFC3339); got != "2021-03-04T03:49:23Z" { // create_time 11:49:23+08:00
		t.Fatalf("timestamp %s", got)
	}
	changedBody := []byte(strings.Replace(string(c.body), `"summary":"支付成功"`, `"summary":"支付成功 "`, 1))
	if string(changedBody) == string(c.body) {
		t.Fatal("the body was not changed")
	}
	changedHeader := func(k, v string) http.Header {
		h := c.header.Clone()
		h.Set(k, v)
		return h
	}
	tests := map[string]struct {
		body   []byte
		header http.Header
		at     time.Time
		check  func(*testing.T, error)
	}{
		"at its timestamp":         {c.body, c.header, c.at, wantDecryptFailure},
		"299 s later":              {c.body, c.header, c.at.Add(299 * time.Second), wantDecryptFailure},
		"299 s earlier":            {c.body, c.header, c.at.Add(-299 * time.Second), wantDecryptFailure},
		"301 s later":              {c.body, c.header, c.at.Add(301 * time.Second), wantErrIs(channels.ErrStale)},
		"301 s earlier":            {c.body, c.header, c.at.Add(-301 * time.Second), wantErrIs(channels.ErrStale)},
		"one body character added": {changedBody, c.header, c.at, wantErrIs(channels.ErrBadSignature)},
		"nonce changed":            {c.body, changedHeader("Wechatpay-Nonce", strings.ToLower(c.header.Get("Wechatpay-Nonce"))), c.at, wantErrIs(channels.ErrBadSignature)},
		"timestamp one s later":    {c.body, changedHeader("Wechatpay-Timestamp", strconv.FormatInt(c.at.Unix()+1, 10)), c.at, wantErrIs(channels.ErrBadSignature)},
		"serial of no key of ours": {c.body, changedHeader("Wechatpay-Serial", "PUB_KEY_ID_0000"), c.at, wantErrIs(channels.ErrBadSignature)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := c.w.Verify(tc.body, tc.header, tc.at)
			tc.check(t, err)
		})
	}
}

func wantErrIs(want error) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("err = %v, want %v", err, want)
		}
	}
}

// TestWeChatPayCaptureSignature: the signature step on its own, over the message as WeChat Pay
// documents it (timestamp, nonce and body, each followed by a newline).
func TestWeChatPayCaptureSignature(t *testing.T) {
	c := loadWeChatCapture(t)
	message := c.header.Get("Wechatpay-Timestamp") + "\n" + c.header.Get("Wechatpay-Nonce") + "\n" + string(c.body) + "\n"
	serial, sig := c.header.Get("Wechatpay-Serial"), c.header.Get("Wechatpay-Signature")
	if err := c.w.verifier.Verify(context.Background(), serial, message, sig); err != nil {
		t.Fatalf("signature: %v", err)
	}
	if err := c.w.verifier.Verify(context.Background(), serial, strings.TrimSuffix(message, "\n"), sig); err == nil {
		t.Fatal("a message without its last newline verified")
	}
}
