package wechatpay

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/downloader"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/outbound"
	"github.com/paygw/paygw/config"
)

// WeChat Pay certificate mode follows WeChat's platform-certificate rotation: WeChat serves a new
// platform certificate from GET /v3/certificates before it signs with it. A Certificates
// refresher downloads that list with the SDK's downloader, at start and every
// CertificateRefresh, and once for a notification whose Wechatpay-Serial is unknown; every
// certificate it downloads is added to the serials the WeChatPay verifier trusts. Public-key
// mode has nothing to download.

// CertificateRefresh is how often serve downloads the platform certificates.
const CertificateRefresh = 12 * time.Hour

const (
	// wechatRefreshGap: an unknown serial starts a download only when none started in the last
	// minute, so that forged serials cannot make paygw hammer WeChat.
	wechatRefreshGap = time.Minute
	// wechatRefreshWait is how long a notification with an unknown serial waits for the download.
	// WeChat waits 5 s for the whole answer; a slower download goes on, and WeChat's redelivery
	// (15 s later) finds the certificate.
	wechatRefreshWait = 2 * time.Second
	// wechatDownloadTimeout bounds a download, whoever waits for it.
	wechatDownloadTimeout = 30 * time.Second
)

// errWeChatUnknownSerial is checkHeader's refusal of a Wechatpay-Serial no key is held for; Verify
// tells it apart to try one refresh.
var errWeChatUnknownSerial = fmt.Errorf("%w: wechatpay: unknown serial", channels.ErrBadSignature)

// wechatCertSet is the platform certificates a WeChatPay verifier trusts, by serial: the
// configured ones, then the downloaded ones. It is the SDK verifier's core.CertificateGetter;
// unlike core.CertificateMap it has a lock, as verifications read it while a refresh adds to it.
type wechatCertSet struct {
	mu     sync.RWMutex
	certs  map[string]*x509.Certificate
	newest string // the serial of the certificate with the latest NotBefore, as the SDK picks it
}

var _ core.CertificateGetter = (*wechatCertSet)(nil)

func newWeChatCertSet(list []*x509.Certificate) *wechatCertSet {
	s := &wechatCertSet{certs: make(map[string]*x509.Certificate, len(list))}
	for _, c := range list {
		s.add(utils.GetCertificateSerialNumber(*c), c)
	}
	return s
}

// add trusts c under serial; false when serial is trusted already (the certificate held stays).
func (s *wechatCertSet) add(serial string, c *x509.Certificate) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.certs[serial]; ok {
		return false
	}
	s.certs[serial] = c
	if n, ok := s.certs[s.newest]; !ok || c.NotBefore.After(n.NotBefore) {
		s.newest = serial
	}
	return true
}

func (s *wechatCertSet) Get(_ context.Context, serial string) (*x509.Certificate, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.certs[serial]
	return c, ok
}

func (s *wechatCertSet) GetAll(_ context.Context) map[string]*x509.Certificate {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := make(map[string]*x509.Certificate, len(s.certs))
	for k, v := range s.certs {
		m[k] = v
	}
	return m
}

func (s *wechatCertSet) GetNewestSerial(_ context.Context) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.newest
}

// knownSerial reports whether a key is held for a Wechatpay-Serial: configured, or downloaded.
func (w *Channel) knownSerial(serial string) bool {
	if w.serials[serial] { // written by New only
		return true
	}
	if w.certs == nil {
		return false
	}
	_, ok := w.certs.Get(context.Background(), serial)
	return ok
}

// CertificateMode reports whether w verifies with platform certificates (alone or beside the
// platform public key), the mode whose certificates rotate.
func (w *Channel) CertificateMode() bool { return w.certs != nil }

// refreshFor asks w's refresher, if any, for one refresh on behalf of an unknown serial, and
// reports whether the serial is known now.
func (w *Channel) refreshFor(serial string) bool {
	r := w.refresher.Load()
	return r != nil && r.forSerial(serial)
}

// Certificates downloads WeChat's platform certificates for a WeChatPay verifier in
// certificate mode, and adds the ones it does not trust yet. Its methods are safe for concurrent
// use; one download runs at a time, and callers arriving meanwhile share its outcome.
type Certificates struct {
	v      *Channel
	client *core.Client
	report func(added []string, err error)
	gap    time.Duration // least time between downloads an unknown serial may start
	wait   time.Duration // how long an unknown serial waits for the download

	mu      sync.Mutex
	running *wechatDownload // the download under way; nil when none
	last    time.Time       // when the latest download started
}

// wechatDownload is one download; done is closed once added and err are set.
type wechatDownload struct {
	done  chan struct{}
	added []string
	err   error
}

// NewCertificates builds the refresher of v's platform certificates, and sets it as the one
// v asks about unknown serials (a later one replaces it). The download is the SDK's
// CertificateDownloader over a core.Client signing as the merchant (merchant_private_key_file,
// merchant_serial_no), sent to api_base_url through the trade query's host-rewriting transport
// over hc (nil: a 15 s timeout). The answer must be signed with a platform key v trusts already:
// a downloaded certificate is trusted because a trusted key signed the list and the APIv3 key
// decrypts it. report, if not nil, is told of every download's newly trusted serials, or of why
// it failed; nothing is added by a failed download.
//
// Errors: channels.ErrNoCredentials naming the missing merchant key; an error when v is in public-key mode,
// or naming the configuration key at fault (never a key's contents).
func NewCertificates(c config.WeChatPay, v *Channel, hc *http.Client, report func(added []string, err error)) (*Certificates, error) {
	switch {
	case v == nil:
		return nil, errors.New("channels: wechatpay: NewWeChatCertificates: nil verifier")
	case !v.CertificateMode():
		return nil, errors.New("channels: wechatpay: public-key mode: no platform certificates to download (channels.wechatpay.platform_certificate_files is empty)")
	}
	client, err := wechatMerchantClient(c, v, hc, wechatCertListValidator{wechatResponseValidator{v: v}})
	if err != nil {
		return nil, err
	}
	r := &Certificates{v: v, client: client, report: report, gap: wechatRefreshGap, wait: wechatRefreshWait}
	v.refresher.Store(r)
	return r, nil
}

// Run downloads the certificates now and then every interval until ctx ends. Failures go to
// report and never stop it: the certificates trusted so far stay trusted.
func (r *Certificates) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_, _ = r.Refresh(ctx) // reported through report
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh downloads the certificates (or joins the download under way) and returns the serials
// it newly trusts. Errors: channels.ErrQueryFailed when WeChat could not be asked or answered an HTTP
// error; channels.ErrBadSignature when the answer is not signed by a trusted platform key; channels.ErrMalformed
// when the list does not parse, decrypt with the APIv3 key, or hold acceptable certificates;
// ctx's error when ctx ends first (the download goes on).
func (r *Certificates) Refresh(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	d := r.startLocked()
	r.mu.Unlock()
	select {
	case <-d.done:
		return slices.Clone(d.added), d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// forSerial is the one refresh a notification with an unknown serial gets: it joins the
// download under way, or starts one unless one started less than gap ago, and waits for it at
// most wait. It reports whether serial is known afterwards.
func (r *Certificates) forSerial(serial string) bool {
	r.mu.Lock()
	if r.v.knownSerial(serial) { // added by the download another notification waited for
		r.mu.Unlock()
		return true
	}
	d := r.running
	if d == nil {
		if !r.last.IsZero() && time.Since(r.last) < r.gap {
			r.mu.Unlock()
			return false
		}
		d = r.startLocked()
	}
	r.mu.Unlock()
	t := time.NewTimer(r.wait)
	defer t.Stop()
	select {
	case <-d.done:
		return r.v.knownSerial(serial)
	case <-t.C:
		return false
	}
}

// startLocked returns the download under way, or starts one; r.mu is held. The download does not
// belong to any one caller, so it runs under its own timeout.
func (r *Certificates) startLocked() *wechatDownload {
	if r.running != nil {
		return r.running
	}
	d := &wechatDownload{done: make(chan struct{})}
	r.running, r.last = d, time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wechatDownloadTimeout)
		defer cancel()
		d.added, d.err = r.download(ctx)
		r.mu.Lock()
		r.running = nil
		r.mu.Unlock()
		close(d.done)
		if r.report != nil {
			r.report(slices.Clone(d.added), d.err)
		}
	}()
	return d
}

// download fetches, checks and adds the certificates; see Refresh for its errors. The SDK's own
// error text (which may quote a whole certificate) never reaches them.
func (r *Certificates) download(ctx context.Context) ([]string, error) {
	const p = "wechatpay: certificate download: "
	var got outbound.Capture
	// A downloader per download: after its first list, the SDK's downloader checks the next one
	// against that list alone; a new one is checked against every key v trusts.
	d, err := downloader.NewCertificateDownloaderWithClient(outbound.With(ctx, &got), r.client, r.v.apiV3Key)
	var apiErr *core.APIError
	switch {
	case got.Status == 0 && err != nil:
		// The url.Error names the SDK's host, not the one asked: keep only its cause.
		return nil, fmt.Errorf("%w: "+p+"%w", channels.ErrQueryFailed, channels.URLCause(err))
	case errors.As(err, &apiErr):
		return nil, fmt.Errorf("%w: "+p+"HTTP %d", channels.ErrQueryFailed, got.Status)
	case errors.Is(err, channels.ErrBadSignature) || errors.Is(err, channels.ErrMalformed):
		return nil, err // from wechatCertListValidator
	case !got.Verified:
		// Not reachable through the SDK as it is: a 2xx answer passes the validator or fails.
		return nil, fmt.Errorf("%w: "+p+"answer not verified", channels.ErrBadSignature)
	case err != nil:
		return nil, fmt.Errorf("%w: "+p+"the list does not parse, does not decrypt with the APIv3 key, is empty, or holds something that is not a PEM certificate", channels.ErrMalformed)
	}

	all := d.GetAll(ctx)
	serials := make([]string, 0, len(all))
	for serial, c := range all {
		if err := checkWeChatCertificate(serial, c); err != nil {
			return nil, fmt.Errorf("%w: "+p+"serial_no %s: %s", channels.ErrMalformed, channels.Quote(serial), err.Error())
		}
		serials = append(serials, serial)
	}
	slices.Sort(serials)
	var added []string
	now := time.Now()
	for _, serial := range serials {
		// An expired certificate signs nothing WeChat sends any more: not worth trusting.
		if c := all[serial]; now.Before(c.NotAfter) && r.v.certs.add(serial, c) {
			added = append(added, serial)
		}
	}
	return added, nil
}

// checkWeChatCertificate holds a downloaded certificate to what New asks of a configured
// one, and to the serial the list names it by (the SDK keys its map by that name unchecked).
func checkWeChatCertificate(serial string, c *x509.Certificate) error {
	key, ok := c.PublicKey.(*rsa.PublicKey) // the SDK verifier would panic on another type
	switch {
	case c.SerialNumber == nil || c.SerialNumber.Sign() <= 0:
		return errors.New("serial number is not positive")
	case utils.GetCertificateSerialNumber(*c) != serial:
		return errors.New("differs from its certificate's serial number")
	case !ok:
		return fmt.Errorf("%T key, want RSA", c.PublicKey)
	}
	return channels.CheckRSAKey(key, MinRSABits)
}

// wechatCertListValidator checks the certificate list's answer as the trade query's is checked
// (a trusted platform key, the clock window), then its shape: the SDK dereferences every field of
// an entry unchecked, and cipher.GCM panics on a nonce of another length than 12.
type wechatCertListValidator struct{ wechatResponseValidator }

func (val wechatCertListValidator) Validate(ctx context.Context, resp *http.Response) error {
	if err := val.wechatResponseValidator.Validate(ctx, resp); err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body) // in memory already
	if err != nil {
		return fmt.Errorf("%w: wechatpay: reading the response: %w", channels.ErrQueryFailed, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := channels.StrictJSON("wechatpay", "certificate list", body); err != nil {
		return err
	}
	var list struct {
		Data []struct {
			SerialNo *string `json:"serial_no"`
			Cert     *struct {
				Algorithm      *string `json:"algorithm"`
				Nonce          *string `json:"nonce"`
				AssociatedData *string `json:"associated_data"`
				Ciphertext     *string `json:"ciphertext"`
			} `json:"encrypt_certificate"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("%w: wechatpay: the certificate list is not {\"data\":[...]}", channels.ErrMalformed)
	}
	for i, e := range list.Data {
		bad := func(what string) error {
			return fmt.Errorf("%w: wechatpay: certificate list data[%d]: %s", channels.ErrMalformed, i, what)
		}
		switch {
		case e.SerialNo == nil || *e.SerialNo == "":
			return bad("serial_no missing")
		case e.Cert == nil || e.Cert.Algorithm == nil || e.Cert.Nonce == nil || e.Cert.AssociatedData == nil || e.Cert.Ciphertext == nil:
			return bad("encrypt_certificate or one of its fields missing")
		case *e.Cert.Algorithm != "AEAD_AES_256_GCM":
			return bad("algorithm " + channels.Quote(*e.Cert.Algorithm))
		case len(*e.Cert.Nonce) != wechatAEADNonceSize:
			return bad(fmt.Sprintf("nonce is %d bytes, want %d", len(*e.Cert.Nonce), wechatAEADNonceSize))
		}
	}
	return nil
}
