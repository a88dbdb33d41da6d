// Package client is the Go client of Memento's HTTP API v1. Errors the server
// answers become *Error values carrying the problem kind (see package problem)
// and status, and match the domain's sentinel errors with errors.Is.
package client
