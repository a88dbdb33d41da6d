// Command memento is Memento's command line: `serve` runs the HTTP API on
// the embedded store or PostgreSQL, and client commands (runs ...) talk to a
// server through the Go client. Run `memento help` for the commands.
package main
