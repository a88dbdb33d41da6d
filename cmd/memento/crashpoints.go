//go:build !memento_crashpoints

package main

import (
	"io"

	"github.com/mementohq/memento/workflow"
)

// crashPoints is empty in a normal build: the binary has no pause points.
// The crash tests build with -tags memento_crashpoints (crashpoints_on.go).
func crashPoints(io.Writer) workflow.Hooks { return workflow.Hooks{} }
