package problem_test

import (
	"regexp"
	"testing"

	"github.com/mementohq/memento/problem"
)

// TestCatalogue: every kind is a kebab-case name with a title and an error
// status, and All hands out a copy.
func TestCatalogue(t *testing.T) {
	kebab := regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)
	all := problem.All()
	if len(all) == 0 {
		t.Fatal("no kinds")
	}
	for k, info := range all {
		if !kebab.MatchString(k) || info.Title == "" || info.Status < 400 || info.Status > 599 {
			t.Errorf("kind %q: %+v", k, info)
		}
		if got, ok := problem.Lookup(k); !ok || got != info {
			t.Errorf("Lookup(%q) = %+v, %v", k, got, ok)
		}
	}
	if _, ok := problem.Lookup("no-such-kind"); ok {
		t.Error("an unknown kind was found")
	}
	delete(all, problem.RevisionConflict)
	if _, ok := problem.Lookup(problem.RevisionConflict); !ok {
		t.Error("changing All's map changed the catalogue")
	}
	if got := problem.Type(problem.LeaseLost); got != "https://memento.dev/problems/lease-lost" {
		t.Errorf("Type = %q", got)
	}
}
