// Package problem owns the stable problem kinds of the HTTP API: each kind's
// kebab-case name, type URI, title and default HTTP status. The server answers
// with them and the client reads them, so the two cannot drift apart.
package problem
