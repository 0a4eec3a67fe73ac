package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/user"
	"time"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/repository"
)

// cliActor names the person behind a command in the audit trail: cli:<OS user>.
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return "cli:" + name
	}
	return "cli:unknown"
}

// cliRequestID ties a command's audit row to its run, as a request id does an HTTP call's.
func cliRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "cli-" + hex.EncodeToString(b[:])
}

// audit appends the row of a write a command made, right after it: a command holds the database's
// own credentials, so its role is admin. A failure is the command's failure: the change is done,
// but the operator must know it left no trace.
func audit(ctx context.Context, db *repository.DB, action, target string, before, after any) error {
	return db.AppendAudit(context.WithoutCancel(ctx), access.Entry{At: time.Now().UTC(), Actor: cliActor(), Role: access.Admin,
		Action: action, Target: target, RequestID: cliRequestID(), Before: access.State(before), After: access.State(after)})
}
