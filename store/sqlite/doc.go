// Package sqlite is the embedded default backend: one SQLite file in a data
// directory, pure Go (modernc.org/sqlite), no server. It implements the domain
// stores (run.Store, ...) with one connection set and one migration chain.
package sqlite
