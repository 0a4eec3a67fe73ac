// Command gen writes paygw's Grafana dashboard (dashboard.Build) to the file named by its one
// argument; `go generate ./internal/dashboard` runs it for deploy/grafana/paygw.json.
package main

import (
	"fmt"
	"os"

	"github.com/paygw/paygw/internal/dashboard"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen OUTPUT.json")
		os.Exit(2)
	}
	out, err := dashboard.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[1], out, 0o644); err != nil { // #nosec G306 G703 -- a committed, public file at the path go generate names
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
