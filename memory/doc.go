// Package memory holds long-term memory: narrow claims about a subject with
// provenance, supersession, expiry, consent and forgetting, their hybrid
// search, and the policy that decides which candidate claims are kept.
package memory
