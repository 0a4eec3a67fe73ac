package history

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// Each generator's golden digest is the SHA-256 of the GoString of its histories of seeds
// 0-1999, one per line. A generator must give the same history for the same seed: the
// regression table and every reported failure name a seed. A change of a generator that is
// meant changes its digest, and then every recorded seed must be looked at again.
func TestGeneratorsAreStable(t *testing.T) {
	for name, g := range map[string]struct {
		generate func(seed uint64) History
		golden   string
	}{
		"Generate":      {Generate, "56a20b41c84bebb89a0bf35e9ce6ec7800976f2af1c2d4b4a1353b4f8fda58ca"},
		"GenerateMoney": {GenerateMoney, "21f3b04968112ee3006fe4b5e5d439d902ebf9b3b23630fd329f95f312d3e1b0"},
	} {
		t.Run(name, func(t *testing.T) {
			h := sha256.New()
			for seed := range uint64(2000) {
				h.Write([]byte(g.generate(seed).GoString() + "\n"))
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != g.golden {
				t.Fatalf("the %s histories of seeds 0-1999 changed: digest %s, want %s", name, got, g.golden)
			}
		})
	}
}
