// Package server is Memento's HTTP API v1: thin handlers over the domain
// services (run, toolop, session, pii), with problem+json errors, API-key tenancy,
// Prometheus metrics, structured request logs and a composed OpenAPI document.
package server
