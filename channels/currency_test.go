package channels_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/paygw/paygw/channels"
)

func TestCNYOnly(t *testing.T) {
	for code, ok := range map[string]bool{"CNY": true, "USD": false, "cny": false, "": false, "JPY": false} {
		err := channels.CNYOnly("alipay", code)
		if (err == nil) != ok {
			t.Errorf("CNYOnly(%q) = %v, want ok=%v", code, err, ok)
		}
		if err != nil && (!errors.Is(err, channels.ErrCurrency) || !strings.Contains(err.Error(), "alipay") || !strings.Contains(err.Error(), `"`+code+`"`)) {
			t.Errorf("CNYOnly(%q) = %q: want ErrCurrency naming the channel and the currency", code, err)
		}
	}
}
