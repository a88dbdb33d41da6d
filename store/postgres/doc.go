// Package postgres is Memento's production backend on PostgreSQL (pgx).
// It implements the domain stores with one connection pool and one embedded
// migration set; every table is keyed by tenant first so it can be distributed.
//
// Sessions and the personal-data vault (SessionStore) live here too when no
// Redis is configured, so several server instances on one database share
// them. Expiry is compared with the database clock; a session's message log
// is trimmed to its cap in the transaction that appends; a sweeper deletes
// expired rows in bounded batches, one instance at a time (a try-advisory
// lock: the others skip their pass). The sweep is the one statement that
// spans tenants (by expiry); every other statement names one tenant.
package postgres
