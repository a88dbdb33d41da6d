//go:build !memento_crashpoints

package main

import (
	"io"
	"testing"
)

// A normal build has no pause points, whatever the environment says.
func TestNoCrashPointsInANormalBuild(t *testing.T) {
	t.Setenv("MEMENTO_FAULT_POINT", "before_call")
	if h := crashPoints(io.Discard); h.At != nil {
		t.Fatal("a normal build installed a crash-point hook")
	}
}
