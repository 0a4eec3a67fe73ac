package testenv

import (
	"crypto/rand"
	"crypto/rsa"
	"sync"
	"testing"
)

// NewRSAKey is a fresh 2048-bit RSA key.
func NewRSAKey(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

var (
	rsaKeysMu sync.Mutex
	rsaKeys   = map[string]*rsa.PrivateKey{}
)

// RSAKey is the 2048-bit RSA key of name, made the first time a test of this binary asks for it
// and shared with every later one: a key costs a noticeable fraction of a second to make.
// Different names are different keys.
func RSAKey(tb testing.TB, name string) *rsa.PrivateKey {
	tb.Helper()
	rsaKeysMu.Lock()
	defer rsaKeysMu.Unlock()
	if k, ok := rsaKeys[name]; ok {
		return k
	}
	k := NewRSAKey(tb)
	rsaKeys[name] = k
	return k
}
