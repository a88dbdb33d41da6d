// Package memento is the state and memory engine for AI agents, used in-process.
// Open wires the domain services (durable runs today) to their backends, the
// embedded SQLite store by default or PostgreSQL, and is the one wiring point.
package memento
