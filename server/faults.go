package server

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/mementohq/memento/problem"
)

// Store faults are told apart without importing any driver: PostgreSQL
// errors carry an SQLSTATE (pgconn.PgError has SQLState), and pgconn's
// connection-level errors say whether the statement surely never reached
// the server (SafeToRetry).
type sqlStater interface{ SQLState() string }
type safeToRetrier interface{ SafeToRetry() bool }

// DefaultRequestTimeout bounds a request's store calls unless configured.
const DefaultRequestTimeout = 30 * time.Second

// DefaultMaxInFlight bounds the API requests served at once unless configured.
const DefaultMaxInFlight = 256

// retryAfterSeconds is what a 503 or 504 tells a client to wait.
const retryAfterSeconds = "1"

// storeFault classifies an error no domain sentinel matched: a backend
// that is unreachable, restarting or out of connections (unavailable), or
// that did not answer in time (timeout). ok is false for anything else.
func storeFault(err error) (kind, detail string, ok bool) {
	var st sqlStater
	if errors.As(err, &st) {
		code := st.SQLState()
		switch {
		case code == "57014": // query_canceled: statement_timeout or a cancel
			return problem.Timeout, "the store did not finish the statement in time", true
		case strings.HasPrefix(code, "08"), code == "57P01", code == "57P02", code == "57P03", strings.HasPrefix(code, "53"):
			return problem.Unavailable, "the store is unavailable or restarting; retry after a moment", true
		case code == "40001", code == "40P01":
			return problem.Unavailable, "the store aborted the transaction (serialization failure or deadlock); retry", true
		}
		return "", "", false
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return problem.Timeout, "the store did not answer within the request deadline", true
	case connectionLost(err):
		return problem.Unavailable, "the store is unreachable; retry after a moment", true
	}
	return "", "", false
}

// connectionLost reports an error of the connection itself, not an answer
// of the database.
func connectionLost(err error) bool {
	var str safeToRetrier
	return isNetError(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &str)
}

// outcomeUnknown reports that a write may have been applied although the
// caller saw err: the statement was (or may have been) sent and no answer
// came back. An answer of the database (an SQLSTATE) means it was refused,
// and a connection error marked safe to retry means it was never sent.
func outcomeUnknown(err error) bool {
	var st sqlStater
	if errors.As(err, &st) {
		return false
	}
	var str safeToRetrier
	if errors.As(err, &str) && str.SafeToRetry() {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false // no connection, so nothing was sent
	}
	return errors.Is(err, context.DeadlineExceeded) || connectionLost(err)
}

// OutcomeUnknown reports that a write may have been applied although the
// caller saw err (see outcomeUnknown); the MCP server answers its write
// tools' such errors as the HTTP API does.
func OutcomeUnknown(err error) bool { return outcomeUnknown(err) }

// writeOutcomeUnknown is the answer to a write whose outcome is unknown,
// with the read that settles it.
func writeOutcomeUnknown(err error, reread string) *apiError {
	return &apiError{kind: problem.CommitOutcomeUnknown, cause: err,
		detail: "the connection to the store broke after the write was sent, so it may or may not have been applied; GET " + reread + " settles it"}
}

// commitOutcomeUnknown is the answer to a commit whose outcome is unknown.
func commitOutcomeUnknown(err error, reread string) *apiError {
	return writeOutcomeUnknown(err, reread+" (if state_revision moved past your expected_revision, the commit was applied)")
}
