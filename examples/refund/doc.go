// Package refund is the crash-safe refund workflow (lookup order, read the customer dialog
// through a verifiable summary, recall and keep a confirmed preference, retrieve the policy,
// decide, approve, refund, verify) and the fake payments service it calls; `memento demo` runs them.
package refund
