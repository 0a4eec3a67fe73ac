package all

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/simulate"
)

// TestApplyTimeout: every channel's deadline sits inside the time it waits for our reply.
func TestApplyTimeout(t *testing.T) {
	man, err := simulate.WriteKeys(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	chs, err := FromConfig(channeltest.LoadConfig(t, man).Channels)
	if err != nil || len(chs) != 4 {
		t.Fatalf("FromConfig: %d channels, %v", len(chs), err)
	}
	tests := map[string]struct {
		want    time.Duration
		replyIn time.Duration // the channel's own wait for our answer
	}{
		"alipay":    {8 * time.Second, 10 * time.Second},
		"wechatpay": {4 * time.Second, 5 * time.Second},
		"stripe":    {8 * time.Second, 10 * time.Second},
		"unionpay":  {8 * time.Second, 10 * time.Second},
	}
	for _, ch := range chs {
		tt := tests[ch.Name()]
		if got := ch.ApplyTimeout(); got != tt.want || got >= tt.replyIn {
			t.Errorf("%s: ApplyTimeout = %s, want %s (inside %s)", ch.Name(), got, tt.want, tt.replyIn)
		}
	}
}

// TestFromConfig: the keys the channels read from config reach the verifiers.
func TestFromConfig(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	man, err := simulate.WriteKeys(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	signers := channeltest.LoadSigners(t, dir)
	load := func(t *testing.T, environ ...string) map[string]channels.Channel {
		t.Helper()
		chs, err := FromConfig(channeltest.LoadConfig(t, man, environ...).Channels)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]channels.Channel{}
		for _, ch := range chs {
			byName[ch.Name()] = ch
		}
		return byName
	}
	verify := func(t *testing.T, ch channels.Channel, s simulate.Signer) error {
		t.Helper()
		m, err := s.Sign(simulate.Payment{TradeNo: "T20260501-0001", AmountFen: 100, Time: now})
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.Verify(m.Body, m.Header, now)
		return err
	}
	second := signers["wechatpay"].(simulate.WeChatPaySigner)
	second.AppID = "wx1111111111111111"

	t.Run("app_ids", func(t *testing.T) {
		chs := load(t, "PAYGW_CHANNELS__WECHATPAY__APP_IDS="+second.AppID)
		if err := verify(t, chs["wechatpay"], signers["wechatpay"]); err != nil {
			t.Errorf("app_id: %v", err)
		}
		if err := verify(t, chs["wechatpay"], second); err != nil {
			t.Errorf("app_ids: %v", err)
		}
	})
	t.Run("app_id alone", func(t *testing.T) {
		if err := verify(t, load(t)["wechatpay"], second); !errors.Is(err, channels.ErrNotOurs) {
			t.Errorf("an unlisted appid: %v, want channels.ErrNotOurs", err)
		}
	})
	t.Run("signer_name", func(t *testing.T) {
		if err := verify(t, load(t)["unionpay"], signers["unionpay"]); err != nil {
			t.Errorf("default signer_name: %v", err)
		}
		// Trusting the test environment's name distrusts the production-named sandbox certificate.
		err := verify(t, load(t, "PAYGW_CHANNELS__UNIONPAY__SIGNER_NAME=00040000:SIGN")["unionpay"], signers["unionpay"])
		if !errors.Is(err, channels.ErrBadSignature) || !strings.Contains(err.Error(), "signer name") {
			t.Errorf("signer_name 00040000:SIGN: %v, want the signer name refused", err)
		}
	})
}
