package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/paygw/paygw/channels/alipay"
	"github.com/paygw/paygw/channels/wechatpay"
	"github.com/paygw/paygw/config"
)

// TestDoctorKeyRulesAreTheChannels: the doctor passes a key exactly when the channel accepts it.
// A legacy 1024-bit Alipay public key serves runs, so the doctor passes it; WeChat Pay refuses
// one, and so does the doctor.
func TestDoctorKeyRulesAreTheChannels(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	text := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))

	if _, err := alipay.FromConfig(config.Alipay{AppID: "2021000000000000", AlipayPublicKey: text}); err != nil {
		t.Fatalf("the Alipay channel refuses the key: %v", err)
	}
	var out bytes.Buffer
	c := &checklist{w: &out}
	publicKeyText(c, "channels.alipay.alipay_public_key", "(inline)", text, alipay.MinPublicKeyBits)
	if c.failed != 0 || !strings.HasPrefix(out.String(), "ok ") {
		t.Errorf("doctor fails a key the Alipay channel accepts: %s", out.String())
	}

	if _, err := wechatpay.New(wechatpay.Config{MchID: "1900000001", AppID: "wx0000000000000000", APIv3Key: strings.Repeat("k", 32),
		PublicKeyID: "PUB_KEY_ID_0001", PublicKey: &key.PublicKey}); err == nil || !strings.Contains(err.Error(), "1024-bit") {
		t.Fatalf("the WeChat Pay channel on a 1024-bit platform key: %v, want it refused for its size", err)
	}
	out.Reset()
	c = &checklist{w: &out}
	publicKeyText(c, "channels.wechatpay.platform_public_key_file", "key.pem", text, wechatpay.MinRSABits)
	if c.failed != 1 {
		t.Errorf("doctor passes a key the WeChat Pay channel refuses: %s", out.String())
	}
}
