// Package redis is the production session backend: sessions, messages and the
// personal-data vault in Redis, one atomic Lua script per operation, native
// expiry on every key, and hash tags that keep one session in one cluster slot.
// Open takes one server's URL or a Redis Cluster's (several seed addresses
// in addr parameters); every script touches one key, so it runs on one node.
// A user's session index is another slot: it is updated by its own command
// after the session's script, and a listing re-checks every candidate against
// its session, so a lost or stale index update never shows a wrong session.
// Concurrent appends share round trips: each is still its own script call,
// sent in one pipeline with the others waiting at that moment (combine.go).
package redis
