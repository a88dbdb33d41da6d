// Package bench measures Memento against baselines run in the same process
// and moment: step commits per second against a minimal-driver floor, through
// the HTTP API, on SQLite, and against DBOS Transact as the nearest peer.
package bench
