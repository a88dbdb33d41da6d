//go:build memento_crashpoints

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mementohq/memento/workflow"
)

// crashPoints, in a binary built for the crash tests, pauses a worker at the
// point named by MEMENTO_FAULT_POINT (for the run MEMENTO_FAULT_RUN only, if
// set): it prints a line to w and blocks until its context ends, so the test
// can SIGKILL it right there.
func crashPoints(w io.Writer) workflow.Hooks {
	point, runID := os.Getenv("MEMENTO_FAULT_POINT"), os.Getenv("MEMENTO_FAULT_RUN")
	if point == "" {
		return workflow.Hooks{}
	}
	return workflow.Hooks{At: func(ctx context.Context, at, id string) {
		if !strings.EqualFold(point, at) || (runID != "" && runID != id) {
			return
		}
		fmt.Fprintf(w, "memento: fault point %s reached (run %s); pausing\n", at, id)
		<-ctx.Done()
	}}
}
