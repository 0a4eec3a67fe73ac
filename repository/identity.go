package repository

import (
	"context"
	"errors"

	"github.com/go-sql-driver/mysql"
)

// Identity is what the database says it is: a random instance id made by the migrations, and an
// epoch that moves on whenever paygw finds the database went back in time.
type Identity struct {
	InstanceID string `db:"instance_id"`
	Epoch      uint64 `db:"epoch"`
}

// Identity reads the database's identity. payment.ErrNotFound if the migrations have not run.
func (db *DB) Identity(ctx context.Context) (Identity, error) {
	const q = `SELECT instance_id, epoch FROM db_identity WHERE id = 1`
	var id Identity
	if err := db.x.GetContext(ctx, &id, db.causalRead(q)); err != nil {
		return Identity{}, notFound(err)
	}
	return id, nil
}

// NextEpoch starts a new epoch above both seen (the epoch the caller read) and floor (the largest
// epoch known elsewhere), unless another replica moved it on since seen was read.
func (db *DB) NextEpoch(ctx context.Context, seen, floor uint64) error {
	const q = `UPDATE db_identity SET epoch = GREATEST(epoch, ?) + 1 WHERE id = 1 AND epoch = ?`
	_, err := db.x.ExecContext(ctx, q, floor, seen)
	return err
}

// BumpEpoch starts a new epoch unconditionally: `paygw markers flush`.
func (db *DB) BumpEpoch(ctx context.Context) (uint64, error) {
	const q = `UPDATE db_identity SET epoch = epoch + 1 WHERE id = 1`
	res, err := db.x.ExecContext(ctx, q)
	if err = oneRow(res, err); errors.Is(err, ErrFenced) || isNoTable(err) {
		return 0, errors.New("the database has no identity yet: run `paygw migrate`")
	} else if err != nil {
		return 0, err
	}
	id, err := db.Identity(ctx)
	return id.Epoch, err
}

// isNoTable reports MySQL's 1146: the table does not exist (the migrations have not run).
func isNoTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1146
}
