package identity_test

import (
	"context"
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
// once Redis answers.
func TestCheckWithRedisDown(t *testing.T) {
	ctx := context.Background()
	g := testenv.DeadGuard(t)
	g.Suspend()
	w, _, _ := watcher(t, g)
	if err := w.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(g.Namespace(), ":1:") {
		t.Fatalf("namespace %q, want epoch 1 bound", g.Namespace())
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
	deadline := time.Now().Add(5 * time.Second)
	for !strings.HasSuffix(g.Namespace(), ":2:") {
		if time.Now().After(deadline) {
			t.Fatalf("namespace %q: the new epoch was not bound", g.Namespace())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
