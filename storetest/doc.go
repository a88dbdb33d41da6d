// Package storetest holds the conformance suites every backend must pass, so
// the embedded and the server backends keep one contract. A backend's tests
// call a suite with a constructor that returns a fresh, empty store.
package storetest
