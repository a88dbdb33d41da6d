// Package memsql holds what the long-term memory stores share and that is no
// SQL: how text and query terms become safe stemmed words, the vector blob
// format, and the (tenant, subject) scope token of the SQLite full text.
package memsql
