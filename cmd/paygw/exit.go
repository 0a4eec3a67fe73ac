package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes, the one table every command's help and the README quote.
const (
	exitOK            = 0 // done
	exitFailed        = 1 // could not run, or ran and failed (doctor: a check failed)
	exitUsage         = 2 // the command line is wrong: unknown command or flag, a missing or malformed value
	exitDiscrepancies = 3 // reconcile bill: the run completed and discrepancies remain for a person
	exitUntrusted     = 4 // reconcile bill: the bill does not hold together; nothing was repaired
)

// exitMeaning is each code's line in a command's help.
var exitMeaning = map[int]string{
	exitOK:            "ok",
	exitFailed:        "failed: could not run, or ran and failed (the reason is the last line on stderr)",
	exitUsage:         "usage error: unknown command or flag, a missing or malformed value",
	exitDiscrepancies: "the run completed and discrepancies remain for a person (listed on stdout)",
	exitUntrusted:     "the bill is untrusted: nothing was repaired (why is on stdout)",
}

// errDiscrepancies makes main exit with exitDiscrepancies: the run completed and found lines a
// person must look at.
var errDiscrepancies = errors.New("discrepancies remain")

// errUntrusted makes main exit with exitUntrusted: the run completed, but the bill does not hold
// together, so it repaired nothing; stdout says why.
var errUntrusted = errors.New("the bill is untrusted: nothing was repaired")

// usageError is a command line that cannot run, found by a command itself (a flag's value that
// parses but makes no sense); cobra's own (unknown flag, missing required flag) are usage errors
// too.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// runError marks an error returned by a command's own run: anything else cobra returns is about
// the command line.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// exitCode maps what Execute returned to the table.
func exitCode(err error) int {
	var usage *usageError
	var run *runError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		return exitUsage
	case errors.Is(err, errDiscrepancies):
		return exitDiscrepancies
	case errors.Is(err, errUntrusted):
		return exitUntrusted
	case errors.As(err, &run):
		return exitFailed
	}
	return exitUsage // cobra's: the command line did not parse
}

// exitsAnnotation lists, in a command's annotations, the codes beyond 0 and 2 it can return.
const exitsAnnotation = "paygw/exits"

// exitCodesText is the annotation holding the "Exit codes:" lines usageTemplate prints.
const exitCodesText = "paygw/exit-codes"

// usageTemplate is cobra's, then the command's exit codes.
func usageTemplate(c *cobra.Command) string {
	return c.UsageTemplate() + `{{with index .Annotations "` + exitCodesText + `"}}
Exit codes:
{{.}}{{end}}`
}

// exits records the codes c can return besides 0 (ok) and 2 (usage), for its help.
func exits(c *cobra.Command, codes ...int) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	s := make([]string, len(codes))
	for i, code := range codes {
		s[i] = fmt.Sprint(code)
	}
	c.Annotations[exitsAnnotation] = strings.Join(s, ",")
	return c
}

// finish walks the tree once it is built: every command's help (usageTemplate) ends with the exit codes it can
// return, and every command's own errors are told from cobra's (see runError).
func finish(c *cobra.Command) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	codes := []int{exitOK}
	if more := c.Annotations[exitsAnnotation]; more != "" {
		for _, s := range strings.Split(more, ",") {
			var code int
			_, _ = fmt.Sscan(s, &code)
			codes = append(codes, code)
		}
	}
	codes = append(codes, exitUsage)
	var b strings.Builder
	for _, code := range sortedCodes(codes) {
		fmt.Fprintf(&b, "  %d  %s\n", code, exitMeaning[code])
	}
	c.Annotations[exitCodesText] = b.String()
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return &runError{err: err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		finish(sub)
	}
}

func sortedCodes(codes []int) []int {
	codes = slices.Clone(codes)
	slices.Sort(codes)
	return slices.Compact(codes)
}
