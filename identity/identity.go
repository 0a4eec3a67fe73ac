// Package identity binds Redis to the database it describes. The database names itself (an
// instance id made by the migrations, and an epoch); every Redis key carries both, so markers
// written for one database never answer for another. A database that went back in time (a
// restore, a failover to a replica that missed commits) is found out at start and every few
// seconds after, off the request path, and its epoch moves on: no marker written before the
// rollback is read again.
package identity

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/repository"
)

// Interval is how often a running paygw reads the identity again: a rollback is found within it.
const Interval = 3 * time.Second

// Watcher keeps a guard's namespace on the database's current epoch.
type Watcher struct {
	db       *repository.DB
	guard    *guard.Guard
	log      zerolog.Logger
	onChange func() // after the namespace changed: drop what was cached under the old one
}

// New builds a watcher; onChange runs after every change of namespace.
func New(db *repository.DB, g *guard.Guard, log zerolog.Logger, onChange func()) *Watcher {
	return &Watcher{db: db, guard: g, log: log, onChange: onChange}
}

// Check reads the database's identity, looks for signs that the database went back in time, and
// binds the guard to its current epoch. The signs, either of which starts a new epoch:
//   - its epoch is older than one already bound for its instance (restored from before then);
//   - its record high-water mark (repository.RecordHighWater: its largest idempotent_record id,
//     or the largest a retention purge may have deleted) is below the high-water mark of its
//     epoch in Redis, the largest record id any done marker of that epoch stands for (it lost
//     records markers vouch for). A purge never lowers the former, so emptying the table on a
//     quiet deployment is not taken for a restore.
//
// With Redis down it binds the epoch the database states; the next Check after Redis returns
// looks again. An error leaves the namespace as it was.
func (w *Watcher) Check(ctx context.Context) error {
	id, err := w.db.Identity(ctx)
	if err != nil {
		return err
	}
	floor, err := w.guard.MaxEpoch(ctx, id.InstanceID)
	if errors.Is(err, guard.ErrUnavailable) {
		w.bind(id)
		return nil
	}
	high, err := w.guard.HighWater(ctx, id.InstanceID, id.Epoch) // before RecordHighWater: see below
	if errors.Is(err, guard.ErrUnavailable) {
		w.bind(id)
		return nil
	}
	// Read after the mark: a record committed between the two reads only makes known larger.
	known, err := w.db.RecordHighWater(ctx)
	if err != nil {
		return err
	}
	if id.Epoch < floor {
		// Another replica may have moved the epoch on since we read it: look again from the
		// start before calling the database restored.
		if again, err := w.db.Identity(ctx); err != nil {
			return err
		} else if again.Epoch != id.Epoch {
			return w.Check(ctx)
		}
	}
	if id.Epoch < floor || known < high {
		w.log.Error().Str("instance", id.InstanceID).Uint64("epoch", id.Epoch).Uint64("epoch_bound_before", floor).
			Int64("record_id_database_knows", known).Int64("record_id_markers_vouch_for", high).
			Msg("the database went back in time (restored, or failed over to a replica that missed commits): " +
				"starting a new epoch, so no done marker written before is trusted again")
		if err := w.db.NextEpoch(ctx, id.Epoch, floor); err != nil {
			return err
		}
		if id, err = w.db.Identity(ctx); err != nil {
			return err
		}
	}
	// Failures here are harmless: the marks only ever rise, and the next Check sets them.
	_ = w.guard.RaiseMaxEpoch(ctx, id.InstanceID, id.Epoch)
	_ = w.guard.RaiseHighWater(ctx, id.InstanceID, id.Epoch, known)
	w.bind(id)
	return nil
}

func (w *Watcher) bind(id repository.Identity) {
	if w.guard.SetNamespace(id.InstanceID, id.Epoch) {
		w.log.Info().Str("instance", id.InstanceID).Uint64("epoch", id.Epoch).Msg("redis markers bound to the database's epoch")
		if w.onChange != nil {
			w.onChange()
		}
	}
}

// Run calls Check every interval until ctx ends. A failure is logged once per streak; the
// namespace stays as it was meanwhile.
func (w *Watcher) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	failed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, every)
		err := w.Check(cctx)
		cancel()
		first := err != nil && !failed
		failed = err != nil
		if first && ctx.Err() == nil {
			w.log.Warn().Err(err).Msg("could not read the database's identity; redis markers stay on the last epoch read")
		}
	}
}
