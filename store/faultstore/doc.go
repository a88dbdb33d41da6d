// Package faultstore wraps any run.Store, toolop.Store, session.Store,
// pii.Store or memory.Store and injects faults by rule, for tests of what sits above a store
// (the workflow engine, resume, the services). A rule picks calls by method
// name, an optional predicate on the arguments, the Nth matching call and a
// probability drawn from a seeded generator, and does one of three things:
//
//   - Fail: return an error before the call; nothing is applied.
//   - Lose: make the call, then return an error; the write is applied but the
//     caller cannot know (a commit whose answer was lost on the wire).
//   - Delay: wait before the call, bounded by MaxDelay and by the context.
//
// The wrappers add no behaviour of their own: with no rule firing they are the
// inner store. Each wrapped method is one call to inject, so a new store
// method is two lines here.
package faultstore
