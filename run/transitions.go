package run

// transitions lists, for each status, the statuses a commit may move it to.
// Terminal statuses have none: nothing is committed to a finished run.
var transitions = map[Status][]Status{
	StatusRunning:   {StatusRunning, StatusSuspended, StatusCompleted, StatusFailed, StatusCancelled},
	StatusSuspended: {StatusSuspended, StatusRunning, StatusFailed, StatusCancelled},
	StatusCompleted: nil,
	StatusFailed:    nil,
	StatusCancelled: nil,
}

// ValidStatus reports whether s is a known status.
func ValidStatus(s Status) bool {
	_, ok := transitions[s]
	return ok
}

// Terminal reports whether no commit can follow s.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// CanTransition reports whether a commit may move a run from -> to.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// AllowedFrom lists the statuses from which a commit may reach to.
func AllowedFrom(to Status) []Status {
	var out []Status
	for _, from := range []Status{StatusRunning, StatusSuspended, StatusCompleted, StatusFailed, StatusCancelled} {
		if CanTransition(from, to) {
			out = append(out, from)
		}
	}
	return out
}
