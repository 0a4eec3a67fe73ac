package identity_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

func watcher(t *testing.T, g *guard.Guard) (*identity.Watcher, *repository.DB, *int) {
	t.Helper()
	db := testenv.Open(t, testenv.NewDatabase(t))
	changes := new(int)
	return identity.New(db, g, testenv.Logger(t), func() { *changes++ }), db, changes
}

func TestCheckBindsTheDatabasesEpoch(t *testing.T) {
	ctx := context.Background()
	g := testenv.Guard(t)
	g.Suspend()
	w, db, changes := watcher(t, g)
	if err := w.Check(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := db.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := id.InstanceID + ":1:"; g.Namespace() != want || *changes != 1 {
		t.Fatalf("namespace %q after %d changes, want %q after 1", g.Namespace(), *changes, want)
	}
	if err := w.Check(ctx); err != nil || *changes != 1 {
		t.Fatalf("a second check changed the namespace: %v, %d changes", err, *changes)
	}
	if e, _ := g.MaxEpoch(ctx, id.InstanceID); e != 1 {
		t.Fatalf("max epoch in Redis = %d, want 1", e)
	}
}

// A database restored from before an epoch began states an epoch older than one already bound
// for its instance: a new epoch above both starts.
func TestCheckMovesPastAnEpochBoundBefore(t *testing.T) {
	ctx := context.Background()
	g := testenv.Guard(t)
	w, db, changes := watcher(t, g)
	id, err := db.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.RaiseMaxEpoch(ctx, id.InstanceID, 5); err != nil {
		t.Fatal(err)
	}
	if err := w.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if id, _ = db.Identity(ctx); id.Epoch != 6 || !strings.HasSuffix(g.Namespace(), ":6:") || *changes != 1 {
		t.Fatalf("epoch %d, namespace %q, %d changes; want epoch 6 bound once", id.Epoch, g.Namespace(), *changes)
	}
}

// With Redis down the watcher cannot compare; it binds what the database states, and looks again
// once Redis answers. Here Redis (a server of the test's own, started late) comes up holding an
// epoch bound before, above the database's: the database was restored meanwhile, so the next
// check starts a new epoch above both.
func TestCheckWithRedisDown(t *testing.T) {
	ctx := context.Background()
	port := testenv.FreePort(t)
	now := time.Now()
	prefix := "paygw-test:" + testenv.Random(6) + ":"
	g := guard.New(guard.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Prefix: prefix, Now: func() time.Time { return now }},
		testenv.Logger(t))
	t.Cleanup(func() { _ = g.Close() })
	g.Suspend()
	w, db, changes := watcher(t, g)
	if err := w.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(g.Namespace(), ":1:") || *changes != 1 {
		t.Fatalf("namespace %q after %d changes, want epoch 1 bound once", g.Namespace(), *changes)
	}

	addr := testenv.OwnRedis(t, port)
	id, err := db.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := guard.New(guard.Options{Addr: addr, Prefix: prefix}, testenv.Logger(t)) // another replica
	t.Cleanup(func() { _ = other.Close() })
	if err := other.RaiseMaxEpoch(ctx, id.InstanceID, 5); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute) // past the guard's skip interval after a failure
	if err := w.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if id, _ = db.Identity(ctx); id.Epoch != 6 || !strings.HasSuffix(g.Namespace(), ":6:") || *changes != 2 {
		t.Fatalf("epoch %d, namespace %q, %d changes; want epoch 6 bound after Redis came back", id.Epoch, g.Namespace(), *changes)
	}
	if e, err := other.MaxEpoch(ctx, id.InstanceID); err != nil || e != 6 {
		t.Fatalf("max epoch in Redis = %d, %v; want 6", e, err)
	}
}

// Run checks on its own: a flush (a new epoch) is bound within the interval.
func TestRunFollowsANewEpoch(t *testing.T) {
	g := testenv.Guard(t)
	w, db, _ := watcher(t, g)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Check(ctx); err != nil {
		t.Fatal(err)
	}
	go w.Run(ctx, 20*time.Millisecond)
	if _, err := db.BumpEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if ns := g.Namespace(); !strings.HasSuffix(ns, ":2:") {
			return fmt.Errorf("namespace %q: the new epoch was not bound", ns)
		}
		return nil
	})
}
