// Command dbospeer measures DBOS Transact for Go, the nearest peer of
// Memento's durable runs: workflows of no-op steps against PostgreSQL, printed
// as JSON steps per second. Its own module, so Memento never depends on DBOS.
package main
