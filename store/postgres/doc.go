// Package postgres is Memento's production backend on PostgreSQL (pgx).
// It implements the domain stores with one connection pool and one embedded
// migration set; every table is keyed by tenant first so it can be distributed.
package postgres
