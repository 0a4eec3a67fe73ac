package handlers

import (
	"net/http"
	"time"
)

// Timeouts bound how long one connection may hold the server at each stage. A body that trickles
// in slower than Read is cut off and refused (408), so a slow sender cannot pin a goroutine and a
// database connection.
type Timeouts struct {
	ReadHeader time.Duration // request line and headers
	Read       time.Duration // the whole request, body included
	Write      time.Duration // from the end of the headers to the end of the response
	Idle       time.Duration // keep-alive between requests
}

// DefaultTimeouts are paygw's production timeouts: Write leaves room for the longest apply
// (apply.ApplyTimeout) after a body read within Read.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 5 * time.Second, Read: 15 * time.Second, Write: 30 * time.Second, Idle: 90 * time.Second}
}

// maxHeaderBytes: the channels' headers are a few hundred bytes; 64 KiB is generous.
const maxHeaderBytes = 64 << 10

// NewHTTPServer is the one place the public listener's server is built, so that tests run the
// very limits production runs.
func NewHTTPServer(addr string, h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}
