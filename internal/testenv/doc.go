// Package testenv connects tests to the real services they need: a schema
// of their own on the tests' PostgreSQL, Redis and a Redis Cluster named by
// the environment (MEMENTO_TEST_*), a fixed vault key, and a clock tests move.
package testenv
