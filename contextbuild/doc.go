// Package contextbuild is working memory: it builds what a model sees from
// the system contract, session or run state, long-term memory, summaries,
// retrieved documents and raw history, under a token budget it never exceeds,
// with an accounting that traces every part to its sources.
package contextbuild
