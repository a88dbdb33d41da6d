// Package pii keeps personal data out of session state, messages and logs: a
// redactor finds e-mail addresses, phone numbers, payment cards and IBANs and
// replaces them with references into a tenant-scoped vault with its own retention.
package pii
