// Package migrate applies a backend's embedded SQL migrations in order, once
// each, in one transaction that holds the backend's migration lock. Each SQL
// backend supplies only its dialect: how to lock, record and list versions.
package migrate
