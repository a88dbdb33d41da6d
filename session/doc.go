// Package session holds session memory: what one conversation is doing right
// now (structured state, recent messages, a summary slot), bound to a tenant
// and a user, with a sliding TTL. It defines the Store interface backends implement.
package session
