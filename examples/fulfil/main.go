// Command fulfil is an example consumer of paygw's webhooks: it verifies each delivery with
// paygw's webhook package, ships each paid order once on MariaDB whatever paygw redelivers, and
// answers 2xx only after its transaction committed.
//
//	FULFIL_WEBHOOK_SECRET=whsec_... go run ./examples/fulfil --dsn 'root@tcp(127.0.0.1:3306)/fulfil?parseTime=true'
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/paygw/paygw/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "fulfil:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends. ready, when not nil, receives the listening address.
func run(ctx context.Context, args []string, stdout io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("fulfil", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8097", "listen address; paygw's webhooks.endpoints url is http://ADDR/webhooks")
	dsn := fs.String("dsn", os.Getenv("FULFIL_DSN"), "MariaDB DSN with parseTime=true (default $FULFIL_DSN)")
	secrets := fs.String("secrets", os.Getenv("FULFIL_WEBHOOK_SECRET"), "the endpoint's whsec_ secret(s), comma-separated during a rotation (default $FULFIL_WEBHOOK_SECRET)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" {
		return errors.New("--dsn or $FULFIL_DSN is required")
	}
	// Configuration: the endpoint's secrets, parsed once.
	v, err := webhook.NewVerifier(strings.Split(*secrets, ",")...)
	if err != nil {
		return err
	}
	// The database: the receipt and fulfilment tables.
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := Migrate(ctx, db); err != nil {
		return err
	}
	// HTTP: POST /webhooks.
	log := slog.New(slog.NewTextHandler(stdout, nil))
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks", &Fulfiller{DB: db, Verifier: v, Now: time.Now, Log: log})
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	log.Info("listening", "url", "http://"+l.Addr().String()+"/webhooks")
	if ready != nil {
		ready <- l.Addr().String()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
