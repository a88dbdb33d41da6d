// Package memstore is the in-memory twin of every store: run.Store,
// toolop.Store, session.Store and pii.Store in one value, with the same
// semantics as the SQL backends (it passes the same storetest conformance
// suites). It is for unit tests of the domain packages, which need a store
// but are not about a database: nothing survives the process, and one mutex
// serialises every call. It is not for production.
package memstore
