// Package compact keeps summaries of a run's events or a session's messages:
// versioned, verifiable artifacts that are a rebuildable cache of the raw log,
// never a source of truth. See summary.go for the artifact and service.go for the API.
package compact
