// Package refund is the crash-safe refund workflow (lookup order, decide,
// approve, refund, verify) and the fake payments service it calls: a separate
// process with a durable ledger file, idempotency keys and a lookup by key.
// `memento demo payments` and `memento demo refund` run them.
package refund
