package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/lease"
)

func TestEvery(t *testing.T) {
	t.Run("at start, then not before the interval", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var looks atomic.Int32
		done := make(chan struct{})
		go func() {
			defer close(done)
			lease.Every(ctx, time.Hour, true, func(context.Context) { looks.Add(1) })
		}()
		testenv.Until(t, 5*time.Second, "the look at start", func() bool { return looks.Load() == 1 })
		cancel()
		<-done
		if n := looks.Load(); n != 1 {
			t.Fatalf("%d looks within the first hour, want 1", n)
		}
	})
	t.Run("every interval, none at start, stops with ctx", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var looks atomic.Int32
		start := time.Now()
		var first time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			lease.Every(ctx, 20*time.Millisecond, false, func(context.Context) {
				if looks.Add(1) == 1 {
					first = time.Since(start)
				}
			})
		}()
		testenv.Until(t, 5*time.Second, "three looks", func() bool { return looks.Load() >= 3 })
		cancel()
		<-done
		after := looks.Load()
		time.Sleep(60 * time.Millisecond) // three more intervals: a loop still running would look
		if looks.Load() != after {
			t.Fatal("looks went on after ctx ended")
		}
		if first < 20*time.Millisecond {
			t.Fatalf("first look after %s, want one interval (20ms)", first)
		}
	})
}

func TestHolder(t *testing.T) {
	if h := lease.Holder("serve"); !strings.HasPrefix(h, "serve on ") || !strings.Contains(h, ":") {
		t.Errorf("Holder(serve) = %q", h)
	}
	if h := lease.Holder(strings.Repeat("x", 100)); len(h) != 64 {
		t.Errorf("Holder of a long name is %d bytes, want 64", len(h))
	}
}

// Hold renews the lease while held; another holder is told who holds it; a lease taken away
// ends the holder's context with ErrLost; release frees it.
func TestHold(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	const name = "test_hold"
	const ttl = 300 * time.Millisecond
	held, release, err := lease.Hold(ctx, db, name, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl) // renewed every ttl/3: still held after twice its ttl
	if held.Err() != nil {
		t.Fatalf("the lease was lost while renewed: %v", context.Cause(held))
	}
	_, _, err = lease.Hold(ctx, db, name, "b", ttl)
	var busy *lease.HeldError
	if !errors.As(err, &busy) || busy.Name != name || busy.Holder != "a" || !strings.Contains(err.Error(), `held by "a"`) {
		t.Fatalf("second holder: %v, want a HeldError naming a", err)
	}

	// Taken away: a's lease lapses and b takes it; a's next renewal finds it gone. (a's renewal
	// may take the lapsed lease back before b asks: then it lapses again.)
	testenv.Eventually(t, 5*time.Second, func() error {
		if err := db.ReleaseLease(ctx, name, "a"); err != nil {
			return err
		}
		if ok, err := db.TakeLease(ctx, name, "b", time.Hour); err != nil || !ok {
			return fmt.Errorf("b takes the lease: %v %v", ok, err)
		}
		return nil
	})
	testenv.Until(t, 5*time.Second, "a's context ends", func() bool { return held.Err() != nil })
	if !errors.Is(context.Cause(held), lease.ErrLost) {
		t.Fatalf("a's context ended with %v, want ErrLost", context.Cause(held))
	}
	release() // a's release must not free b's lease
	if _, _, err := lease.Hold(ctx, db, name, "c", ttl); !errors.As(err, &busy) || busy.Holder != "b" {
		t.Fatalf("after a's release: %v, want held by b", err)
	}
	if err := db.ReleaseLease(ctx, name, "b"); err != nil {
		t.Fatal(err)
	}
	_, release, err = lease.Hold(ctx, db, name, "c", ttl)
	if err != nil {
		t.Fatalf("a free lease: %v", err)
	}
	release()
}
