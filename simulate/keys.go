package simulate

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// Sandbox identities: what the generated config trusts and the signers claim to be.
const (
	SandboxAlipayAppID   = "2021000000000000"
	SandboxWeChatMchID   = "1900000001"
	SandboxWeChatAppID   = "wx0000000000000000"
	SandboxUnionPayMerID = "777290058110048"
	manifestName         = "keys.json"
	configName           = "channels.yaml"
)

// Manifest is DIR/keys.json: where each channel's sandbox material is. File names are relative
// to the directory.
type Manifest struct {
	Alipay struct {
		AppID          string `json:"app_id"`
		PrivateKeyFile string `json:"private_key_file"`
		PublicKeyFile  string `json:"public_key_file"`
		// The merchant's side, for trade queries: the app key pair the merchant signs with.
		AppPrivateKeyFile string `json:"app_private_key_file"`
		AppPublicKeyFile  string `json:"app_public_key_file"`
	} `json:"alipay"`
	WeChatPay struct {
		MchID          string `json:"mch_id"`
		AppID          string `json:"app_id"`
		APIv3Key       string `json:"api_v3_key"`
		PublicKeyID    string `json:"public_key_id"`
		PrivateKeyFile string `json:"private_key_file"`
		PublicKeyFile  string `json:"public_key_file"`
		// The merchant's side: the merchant API key pair and its certificate serial.
		MerchantPrivateKeyFile string `json:"merchant_private_key_file"`
		MerchantPublicKeyFile  string `json:"merchant_public_key_file"`
		MerchantSerialNo       string `json:"merchant_serial_no"`
		// Certificate mode: a platform certificate (PEM) over the platform key of PrivateKeyFile.
		// The fake serves every certificate in this file from /v3/certificates. Empty in
		// sandboxes generated before certificate mode.
		PlatformCertFile string `json:"platform_cert_file,omitempty"`
	} `json:"wechatpay"`
	Stripe struct {
		WebhookSecret string `json:"webhook_secret"`
		APIKey        string `json:"api_key"` // the merchant's secret key, sk_test_...
	} `json:"stripe"`
	UnionPay struct {
		MerID                string `json:"mer_id"`
		SigningKeyFile       string `json:"signing_key_file"`
		SigningCertFile      string `json:"signing_cert_file"`
		RootCertFile         string `json:"root_cert_file"`
		IntermediateCertFile string `json:"intermediate_cert_file"`
		// The merchant's side: its signing certificate as PKCS#12, and the certificate alone
		// (PEM) for the fake channel to check request signatures with.
		MerchantSignCertFile     string `json:"merchant_sign_cert_file"`
		MerchantSignCertPassword string `json:"merchant_sign_cert_password"`
		MerchantCertFile         string `json:"merchant_cert_file"`
	} `json:"unionpay"`

	ConfigPath string `json:"-"` // DIR/channels.yaml, set by WriteKeys
}

// Channels lists the channels the manifest holds material for.
func (m Manifest) Channels() []string { return []string{"alipay", "wechatpay", "stripe", "unionpay"} }

// WriteKeys generates fresh sandbox key material for every channel into dir (private files
// 0600), the manifest, and dir/channels.yaml: the channels: block of a gateway config that
// trusts exactly this material.
func WriteKeys(dir string, now time.Time) (Manifest, error) {
	var m Manifest
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return m, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return m, err
	}
	w := keyWriter{dir: abs}

	w.rsaPair("alipay_private.pem", "alipay_public.pem")
	m.Alipay.AppID, m.Alipay.PrivateKeyFile, m.Alipay.PublicKeyFile = SandboxAlipayAppID, "alipay_private.pem", "alipay_public.pem"
	m.Alipay.AppPrivateKeyFile, m.Alipay.AppPublicKeyFile = "alipay_app_private.pem", "alipay_app_public.pem"
	w.rsaPair(m.Alipay.AppPrivateKeyFile, m.Alipay.AppPublicKeyFile)

	platformKey := w.rsaPair("wechatpay_private.pem", "wechatpay_public.pem")
	m.WeChatPay.MchID, m.WeChatPay.AppID = SandboxWeChatMchID, SandboxWeChatAppID
	m.WeChatPay.APIv3Key = randomAlnum(32)
	m.WeChatPay.PublicKeyID = "PUB_KEY_ID_01" + strings.ToUpper(randomHex(12))
	m.WeChatPay.PrivateKeyFile, m.WeChatPay.PublicKeyFile = "wechatpay_private.pem", "wechatpay_public.pem"
	m.WeChatPay.MerchantPrivateKeyFile, m.WeChatPay.MerchantPublicKeyFile = "wechatpay_merchant_private.pem", "wechatpay_merchant_public.pem"
	m.WeChatPay.MerchantSerialNo = strings.ToUpper(randomHex(40))
	w.rsaPair(m.WeChatPay.MerchantPrivateKeyFile, m.WeChatPay.MerchantPublicKeyFile)
	m.WeChatPay.PlatformCertFile = "wechatpay_platform_cert.pem"
	w.wechatPlatformCert(m.WeChatPay.PlatformCertFile, platformKey, now)

	m.Stripe.WebhookSecret = "whsec_" + randomAlnum(32)
	m.Stripe.APIKey = "sk_test_" + randomAlnum(32)

	m.UnionPay.MerID = SandboxUnionPayMerID
	m.UnionPay.SigningKeyFile, m.UnionPay.SigningCertFile = "unionpay_sign_key.pem", "unionpay_sign_cert.pem"
	m.UnionPay.RootCertFile, m.UnionPay.IntermediateCertFile = "unionpay_root.pem", "unionpay_intermediate.pem"
	m.UnionPay.MerchantSignCertFile, m.UnionPay.MerchantCertFile = "unionpay_merchant_sign.pfx", "unionpay_merchant_cert.pem"
	m.UnionPay.MerchantSignCertPassword = randomAlnum(12)
	w.unionPay(m, now)

	manifest, _ := json.MarshalIndent(m, "", "  ") // plain strings: cannot fail
	w.write(manifestName, manifest, 0o600)
	m.ConfigPath = filepath.Join(abs, configName)
	w.write(configName, []byte(m.configYAML(abs)), 0o600)
	return m, w.err
}

// FakeAddr is where `paygw simulate serve` listens unless told otherwise, and where channels.yaml
// points the gateway's outbound calls (trade queries).
const FakeAddr = "127.0.0.1:8090"

// configYAML is the channels: block trusting the sandbox material in dir, with the merchant's side
// (its keys, and the channels' API addresses) pointing at a fake channel on FakeAddr.
func (m Manifest) configYAML(dir string) string {
	p := func(name string) string { return filepath.Join(dir, name) }
	fake := "http://" + FakeAddr
	return fmt.Sprintf(`# Generated by paygw simulate keys: a gateway with this block trusts the sandbox keys beside it,
# and asks the fake channel of `+"`paygw simulate serve`"+` (on %s) about trades.
channels:
  alipay:
    enabled: true
    app_id: %q
    alipay_public_key_file: %q
    app_private_key_file: %q
    gateway_url: %q
  wechatpay:
    enabled: true
    mch_id: %q
    app_id: %q
    api_v3_key: %q
    platform_public_key_id: %q
    platform_public_key_file: %q
    merchant_private_key_file: %q
    merchant_serial_no: %q
    api_base_url: %q
  stripe:
    enabled: true
    webhook_secrets: [%q]
    tolerance: 300s
    api_key: %q
    api_base_url: %q
  unionpay:
    enabled: true
    mer_id: %q
    root_cert_file: %q
    intermediate_cert_file: %q
    sign_cert_file: %q
    sign_cert_password: %q
    query_url: %q
`, FakeAddr,
		m.Alipay.AppID, p(m.Alipay.PublicKeyFile), p(m.Alipay.AppPrivateKeyFile), fake+"/gateway.do",
		m.WeChatPay.MchID, m.WeChatPay.AppID, m.WeChatPay.APIv3Key, m.WeChatPay.PublicKeyID, p(m.WeChatPay.PublicKeyFile),
		p(m.WeChatPay.MerchantPrivateKeyFile), m.WeChatPay.MerchantSerialNo, fake,
		m.Stripe.WebhookSecret, m.Stripe.APIKey, fake,
		m.UnionPay.MerID, p(m.UnionPay.RootCertFile), p(m.UnionPay.IntermediateCertFile),
		p(m.UnionPay.MerchantSignCertFile), m.UnionPay.MerchantSignCertPassword, fake+"/gateway/api/queryTrans.do")
}

// ReadManifest reads dir/keys.json, written by WriteKeys.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	raw, err := os.ReadFile(filepath.Join(dir, manifestName)) // #nosec G304 -- the sandbox directory the operator names
	if err != nil {
		return m, fmt.Errorf("no sandbox keys in %s (run paygw simulate keys --out %s): %w", dir, dir, err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("%s: %w", manifestName, err)
	}
	return m, nil
}

// LoadSigners reads dir/keys.json and the keys it names into one Signer per channel.
func LoadSigners(dir string) (map[string]Signer, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	r := keyReader{dir: dir}
	signers := map[string]Signer{
		"alipay": AlipaySigner{AppID: m.Alipay.AppID, Key: r.privateKey(m.Alipay.PrivateKeyFile)},
		"wechatpay": WeChatPaySigner{MchID: m.WeChatPay.MchID, AppID: m.WeChatPay.AppID, APIv3Key: m.WeChatPay.APIv3Key,
			Serial: m.WeChatPay.PublicKeyID, Key: r.privateKey(m.WeChatPay.PrivateKeyFile)},
		"stripe":   StripeSigner{Secret: m.Stripe.WebhookSecret},
		"unionpay": UnionPaySigner{MerID: m.UnionPay.MerID, Key: r.privateKey(m.UnionPay.SigningKeyFile), CertPEM: r.file(m.UnionPay.SigningCertFile)},
	}
	return signers, r.err
}

// keyWriter writes files into dir and keeps the first error.
type keyWriter struct {
	dir string
	err error
}

func (w *keyWriter) write(name string, data []byte, mode os.FileMode) {
	if w.err == nil {
		w.err = os.WriteFile(filepath.Join(w.dir, name), data, mode)
	}
}

func (w *keyWriter) rsaPair(private, public string) *rsa.PrivateKey {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		w.err = errors.Join(w.err, err)
		return nil
	}
	w.write(private, PEMPrivateKey(key), 0o600)
	w.write(public, PEMPublicKey(&key.PublicKey), 0o644)
	return key
}

type keyReader struct {
	dir string
	err error
}

func (r *keyReader) file(name string) []byte {
	b, err := os.ReadFile(filepath.Join(r.dir, name)) // #nosec G304 -- a file of the sandbox directory, named by its manifest
	if err != nil && r.err == nil {
		r.err = err
	}
	return b
}

func (r *keyReader) privateKey(name string) *rsa.PrivateKey {
	b := r.file(name)
	if r.err != nil {
		return nil
	}
	block, _ := pem.Decode(b)
	if block == nil {
		r.err = fmt.Errorf("%s: no PEM block", name)
		return nil
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		r.err = fmt.Errorf("%s: %w", name, err)
		return nil
	}
	rk, ok := key.(*rsa.PrivateKey)
	if !ok {
		r.err = fmt.Errorf("%s: not an RSA key", name)
	}
	return rk
}

// PEMPrivateKey encodes key as PKCS#8 PEM.
func PEMPrivateKey(key *rsa.PrivateKey) []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(key) // an RSA key always marshals
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// PEMPublicKey encodes key as PKIX PEM, the form the consoles show.
func PEMPublicKey(key *rsa.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(key) // an RSA key always marshals
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)[:n]
}

func randomAlnum(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// wechatPlatformCert writes a self-signed platform certificate over key, valid five years as
// WeChat's platform certificates are, with a 20-byte serial (40 hex digits, as WeChat's are).
func (w *keyWriter) wechatPlatformCert(name string, key *rsa.PrivateKey, now time.Time) {
	if w.err != nil || key == nil {
		return
	}
	cert, err := NewWeChatPlatformCertificate(key, now)
	if err != nil {
		w.err = errors.Join(w.err, err)
		return
	}
	w.write(name, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644)
}

// NewWeChatPlatformCertificate makes a self-signed WeChat Pay platform certificate over key,
// valid from an hour before now for five years. Tests use it to stand for a rotated-in
// certificate.
func NewWeChatPlatformCertificate(key *rsa.PrivateKey, now time.Time) (*x509.Certificate, error) {
	serial := make([]byte, 20)
	if _, err := rand.Read(serial); err != nil {
		return nil, err
	}
	serial[0] |= 0x40 // positive, and 20 bytes long whatever the random bytes
	serial[0] &= 0x7f
	tmpl := &x509.Certificate{
		SerialNumber: new(big.Int).SetBytes(serial),
		Subject:      pkix.Name{CommonName: "Tenpay.com sandbox platform", Organization: []string{"paygw sandbox"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// unionPay writes a sandbox CA chain (root, intermediate) and a signing certificate and key.
func (w *keyWriter) unionPay(m Manifest, now time.Time) {
	sb, err := NewUnionPaySandbox(now)
	if err != nil {
		w.err = errors.Join(w.err, err)
		return
	}
	w.write(m.UnionPay.RootCertFile, sb.RootPEM(), 0o644)
	w.write(m.UnionPay.IntermediateCertFile, sb.IntermediatePEM(), 0o644)
	w.write(m.UnionPay.SigningCertFile, sb.CertPEM(), 0o644)
	w.write(m.UnionPay.SigningKeyFile, sb.KeyPEM(), 0o600)
	pfx, certPEM, err := merchantPKCS12(now, m.UnionPay.MerchantSignCertPassword)
	if err != nil {
		w.err = errors.Join(w.err, err)
		return
	}
	w.write(m.UnionPay.MerchantSignCertFile, pfx, 0o600)
	w.write(m.UnionPay.MerchantCertFile, certPEM, 0o644)
}

// merchantPKCS12 makes a merchant signing certificate and key, self-signed as UnionPay's test
// merchant certificates are issued for a merchant, and packs them as the .pfx merchants receive.
func merchantPKCS12(now time.Time, password string) (pfx, certPEM []byte, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: unionPaySerial(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "041@Z12@" + SandboxUnionPayMerID + "@00000001", Organization: []string{"paygw sandbox merchant"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pfx, err = pkcs12.Modern.Encode(key, cert, nil, password)
	return pfx, unionPayCertPEM(cert), err
}
