// Package redis is the production session backend: sessions, messages and the
// personal-data vault in Redis, one atomic Lua script per operation, native
// expiry on every key, and hash tags that keep one session in one cluster slot.
package redis
