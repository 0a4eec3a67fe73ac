package unionpay

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" // #nosec G505 -- UnionPay's whole PKI is SHA1-RSA; see unionPayHash
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"
)

// UnionPay's certificates are checked here rather than by x509.Certificate.Verify because every
// certificate of UnionPay's PKI, test and production, root, middle and signing leaf alike, is
// signed SHA1-RSA, which crypto/x509 refuses outright. UnionPay's own SDKs accept it. SHA-1 is
// accepted for these certificates only: the trust anchors are the root and intermediate the
// merchant configured (no system pool is consulted), and every other certificate check in paygw
// stays on crypto/x509's defaults.

// unionPayChain is what a UnionPay verifier trusts: the configured roots, and each configured
// intermediate with the roots found at start to have issued it.
type unionPayChain struct {
	roots []*x509.Certificate
	links []unionPayLink
}

// unionPayLink is one configured intermediate and the configured roots that signed it.
type unionPayLink struct {
	mid   *x509.Certificate
	roots []*x509.Certificate
}

// errUnionPayAlgorithm is a certificate signed with an algorithm other than SHA1-RSA or
// SHA256-RSA: MD5, another hash, RSA-PSS, ECDSA or one crypto/x509 does not know.
var errUnionPayAlgorithm = errors.New("signature algorithm is neither SHA1-RSA nor SHA256-RSA")

// unionPayHash is the hash an accepted certificate signature algorithm names.
func unionPayHash(alg x509.SignatureAlgorithm) (crypto.Hash, bool) {
	switch alg {
	case x509.SHA1WithRSA:
		return crypto.SHA1, true
	case x509.SHA256WithRSA:
		return crypto.SHA256, true
	}
	return 0, false
}

// unionPayIssued checks that parent issued child: child names parent as its issuer (the DER of
// the names, byte for byte, as RFC 5280 path building compares them), and child's signature is an
// RSA PKCS #1 v1.5 signature by parent's key over child's TBSCertificate with the hash child's
// signature algorithm names. Only SHA1-RSA and SHA256-RSA are accepted.
func unionPayIssued(child, parent *x509.Certificate) error {
	if !bytes.Equal(child.RawIssuer, parent.RawSubject) {
		return errors.New("issuer name differs")
	}
	h, ok := unionPayHash(child.SignatureAlgorithm)
	if !ok {
		return errUnionPayAlgorithm
	}
	key, ok := parent.PublicKey.(*rsa.PublicKey)
	if !ok {
		return errors.New("issuer key is not RSA")
	}
	var digest []byte
	switch h {
	case crypto.SHA1:
		sum := sha1.Sum(child.RawTBSCertificate) // #nosec G401 -- see unionPayHash
		digest = sum[:]
	default:
		sum := sha256.Sum256(child.RawTBSCertificate)
		digest = sum[:]
	}
	if err := rsa.VerifyPKCS1v15(key, h, digest, child.Signature); err != nil {
		return errors.New("signature does not verify")
	}
	return nil
}

// unionPayCA checks what a root or intermediate must carry to issue certificates: the CA flag in
// valid basic constraints, keyCertSign when a key usage is given at all, no critical extension
// crypto/x509 does not handle, and an RSA key (UnionPay signs with RSA only).
func unionPayCA(c *x509.Certificate) error {
	switch {
	case c == nil:
		return errors.New("no certificate")
	case !c.BasicConstraintsValid || !c.IsCA:
		return errors.New("not a CA certificate")
	case c.KeyUsage != 0 && c.KeyUsage&x509.KeyUsageCertSign == 0:
		return errors.New("key usage does not allow certificate signing")
	case len(c.UnhandledCriticalExtensions) > 0:
		return errors.New("has a critical extension paygw does not handle")
	}
	if _, ok := c.PublicKey.(*rsa.PublicKey); !ok {
		return errors.New("key is not RSA")
	}
	return nil
}

// newUnionPayChain checks the configured anchors and links every intermediate to the roots that
// issued it, by unionPayIssued: the same check every signing certificate meets. Validity periods
// are not checked here but at each message's time, like the signing certificate's. Errors name the
// configuration key at fault and carry no certificate material.
func newUnionPayChain(roots, mids []*x509.Certificate) (*unionPayChain, error) {
	const rootKey, midKey = "channels.unionpay.root_cert_file", "channels.unionpay.intermediate_cert_file"
	if len(roots) == 0 {
		return nil, errors.New(rootKey + ": no certificate")
	}
	if len(mids) == 0 {
		return nil, errors.New(midKey + ": no certificate")
	}
	for _, r := range roots {
		if err := unionPayCA(r); err != nil {
			return nil, fmt.Errorf("%s: %w", rootKey, err)
		}
		// A root that allows no CA below it cannot anchor UnionPay's three-level chain.
		if r.MaxPathLen == 0 && r.MaxPathLenZero {
			return nil, errors.New(rootKey + ": path length 0 allows no intermediate")
		}
	}
	chain := &unionPayChain{roots: roots}
	for _, m := range mids {
		if err := unionPayCA(m); err != nil {
			return nil, fmt.Errorf("%s: %w", midKey, err)
		}
		link := unionPayLink{mid: m}
		algorithm := false
		for _, r := range roots {
			switch err := unionPayIssued(m, r); {
			case err == nil:
				link.roots = append(link.roots, r)
			case errors.Is(err, errUnionPayAlgorithm):
				algorithm = true
			}
		}
		// A middle certificate from another chain (test vs production) would make every
		// notification fail; say so at start rather than at the first payment.
		switch {
		case len(link.roots) == 0 && algorithm:
			return nil, fmt.Errorf("%s: %w", midKey, errUnionPayAlgorithm)
		case len(link.roots) == 0:
			return nil, errors.New(midKey + ": not issued by a certificate in " + rootKey)
		}
		chain.links = append(chain.links, link)
	}
	return chain, nil
}

// validAt reports whether now is inside c's validity period, both ends included as in RFC 5280.
func validAt(c *x509.Certificate, now time.Time) bool {
	return !now.Before(c.NotBefore) && !now.After(c.NotAfter)
}

// verify checks a signing certificate at now: it is valid at now, its key usage allows
// signatures, it was issued by a configured intermediate (unionPayIssued), and that intermediate
// and one of the roots that issued it are both valid at now. The result is a short reason for the
// error, "" when the chain holds; it never quotes the certificate.
func (c *unionPayChain) verify(leaf *x509.Certificate, now time.Time) string {
	switch {
	case now.Before(leaf.NotBefore):
		return "certificate not yet valid"
	case now.After(leaf.NotAfter):
		return "certificate expired"
	case !unionPaySigningUsage(leaf.KeyUsage):
		return "certificate key usage does not allow signatures"
	case len(leaf.UnhandledCriticalExtensions) > 0:
		return "certificate has a critical extension paygw does not handle"
	}
	reason := "certificate does not chain"
	for _, l := range c.links {
		err := unionPayIssued(leaf, l.mid)
		switch {
		case errors.Is(err, errUnionPayAlgorithm):
			reason = "certificate " + errUnionPayAlgorithm.Error()
			continue
		case err != nil:
			continue
		case !validAt(l.mid, now):
			reason = "certificate chain not valid now" // the intermediate is out of date
			continue
		}
		for _, r := range l.roots {
			if validAt(r, now) {
				return ""
			}
		}
		reason = "certificate chain not valid now" // every root that issued it is out of date
	}
	return reason
}

// unionPaySigningUsage: a key usage extension, when present, must allow digitalSignature or
// contentCommitment (nonRepudiation). UnionPay's signing certificates carry both (with
// keyEncipherment and keyAgreement); a certificate without the extension is unrestricted
// (RFC 5280 4.2.1.3), as crypto/x509 treats it too.
func unionPaySigningUsage(ku x509.KeyUsage) bool {
	return ku == 0 || ku&(x509.KeyUsageDigitalSignature|x509.KeyUsageContentCommitment) != 0
}

// Certificate describes one configured trust anchor, for the start-up log: which file it
// came from (Role "root" or "intermediate"), its subject CN, the algorithm its issuer signed it
// with and its expiry.
type Certificate struct {
	Role               string
	CommonName         string
	SignatureAlgorithm string // as crypto/x509 names it: "SHA1-RSA", "SHA256-RSA"
	NotAfter           time.Time
}

func (c Certificate) String() string {
	return fmt.Sprintf("%s %q %s, valid until %s", c.Role, c.CommonName, c.SignatureAlgorithm, c.NotAfter.UTC().Format(time.RFC3339))
}

// Chain describes the configured roots, then the configured intermediates, so that an operator
// sees at start which chain (test or production) is trusted, that it is SHA-1 signed, and when it
// runs out.
func (u *Channel) Chain() []Certificate {
	describe := func(role string, c *x509.Certificate) Certificate {
		return Certificate{Role: role, CommonName: strings.ToValidUTF8(c.Subject.CommonName, "?"),
			SignatureAlgorithm: c.SignatureAlgorithm.String(), NotAfter: c.NotAfter}
	}
	out := make([]Certificate, 0, len(u.chain.roots)+len(u.chain.links))
	for _, r := range u.chain.roots {
		out = append(out, describe("root", r))
	}
	for _, l := range u.chain.links {
		out = append(out, describe("intermediate", l.mid))
	}
	return out
}
