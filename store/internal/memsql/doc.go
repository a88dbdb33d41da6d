// Package memsql holds what the SQL backends' long-term memory stores share
// and that is no SQL: how query terms become safe words, the vector blob
// format, and the (tenant, subject) scope token of the SQLite full text.
package memsql
