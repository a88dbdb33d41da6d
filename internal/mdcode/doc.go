// Package mdcode reads the fenced code blocks of a Markdown document, so
// tests can run and check the examples of the guides in docs/ and the
// guides cannot drift from what the code does.
package mdcode
