// Package run holds durable runs: the record from which an agent workflow
// continues at the exact step after a crash. It defines runs, events, leases,
// checkpoints and schema migrations, the Store interface backends implement,
// and the Service that enforces the rules (revisions, fencing, transitions, limits).
package run
