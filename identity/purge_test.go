package identity_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

// retention is the purge's in these tests; records are made older than it.
const retention = 7 * 24 * time.Hour

// loggedWatcher is a watcher on a fresh database whose log can be read back.
type loggedWatcher struct {
	*identity.Watcher
	dsn     string
	db      *repository.DB
	log     *bytes.Buffer
	changes int
}

func newLoggedWatcher(t *testing.T) *loggedWatcher {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	lw := &loggedWatcher{dsn: dsn, db: testenv.Open(t, dsn), log: new(bytes.Buffer)}
	logger := zerolog.New(zerolog.MultiLevelWriter(lw.log, zerolog.NewTestWriter(t)))
	lw.Watcher = identity.New(lw.db, testenv.Guard(t), logger, func() { lw.changes++ })
	return lw
}

// addRecords commits n final records created age ago, as the notification path leaves them.
func (lw *loggedWatcher) addRecords(t *testing.T, n int, age time.Duration) {
	t.Helper()
	for range n {
		testenv.Exec(t, lw.dsn, `INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status, create_time)
			VALUES (?, 'pay_notify', 'alipay', REPEAT('0', 64), ?, UTC_TIMESTAMP(3) - INTERVAL ? SECOND)`,
			testenv.Random(8), repository.StatusSuccess, int64(age.Seconds()))
	}
}

// check runs Check and returns the epoch the database states after it.
func (lw *loggedWatcher) check(t *testing.T) uint64 {
	t.Helper()
	if err := lw.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	id, err := lw.db.Identity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return id.Epoch
}

func (lw *loggedWatcher) purge(t *testing.T) repository.Purged {
	t.Helper()
	p, err := lw.db.PurgeRecords(context.Background(), retention, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const wentBack = "the database went back in time"

// TestIssue20Case10PurgeIsNotARestore: on a quiet deployment every record is past retention and
// the purge takes all it may. The watcher, whose high-water mark vouches for the newest record,
// must not take that for a restore: same epoch, same namespace, nothing logged at error.
func TestIssue20Case10PurgeIsNotARestore(t *testing.T) {
	lw := newLoggedWatcher(t)
	lw.addRecords(t, 20, 30*24*time.Hour)
	if e := lw.check(t); e != 1 {
		t.Fatalf("epoch %d before the purge, want 1", e)
	}
	for pass := range 2 { // the next day's purge of the same quiet table too
		p := lw.purge(t)
		if e := lw.check(t); e != 1 || lw.changes != 1 || strings.Contains(lw.log.String(), wentBack) {
			t.Fatalf("pass %d: epoch %d after %d namespace changes: the purge of %d records was taken for a restore; logged:\n%s",
				pass, e, lw.changes, p.Rows, lw.log)
		}
		if want := int64(20 * (1 - pass)); p.Rows != want {
			t.Fatalf("pass %d purged %d records, want %d (all)", pass, p.Rows, want)
		}
	}
}

// A real restore is still found, whether a purge ran before it or the dump is of a purged
// database: the records the markers vouch for are gone, and a new epoch starts.
func TestCheckFindsARestoreAroundAPurge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(t *testing.T, lw *loggedWatcher) (backup string)
	}{
		{"no purge", func(t *testing.T, lw *loggedWatcher) string {
			lw.addRecords(t, 3, 30*24*time.Hour)
			backup := testenv.Dump(t, lw.dsn)
			lw.addRecords(t, 3, time.Hour)
			return backup
		}},
		{"a purge after the dump", func(t *testing.T, lw *loggedWatcher) string {
			lw.addRecords(t, 3, 30*24*time.Hour)
			backup := testenv.Dump(t, lw.dsn)
			lw.addRecords(t, 3, 30*24*time.Hour)
			lw.check(t) // the markers' mark vouches for the newest record
			if p := lw.purge(t); p.Rows != 6 {
				t.Fatalf("purged %d, want 6", p.Rows)
			}
			return backup
		}},
		{"a dump of a purged database", func(t *testing.T, lw *loggedWatcher) string {
			lw.addRecords(t, 3, 30*24*time.Hour)
			if p := lw.purge(t); p.Rows != 3 {
				t.Fatalf("purged %d, want 3", p.Rows)
			}
			backup := testenv.Dump(t, lw.dsn)
			lw.addRecords(t, 1, time.Hour)
			return backup
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lw := newLoggedWatcher(t)
			backup := tc.steps(t, lw)
			if e := lw.check(t); e != 1 || lw.changes != 1 {
				t.Fatalf("epoch %d after %d changes before the restore, want 1 after 1", e, lw.changes)
			}
			testenv.Restore(t, lw.dsn, backup)
			if e := lw.check(t); e != 2 || lw.changes != 2 {
				t.Fatalf("epoch %d after %d changes: the restore was not found", e, lw.changes)
			}
			if !strings.Contains(lw.log.String(), wentBack) {
				t.Fatalf("the restore was not logged: %s", lw.log)
			}
		})
	}
}
