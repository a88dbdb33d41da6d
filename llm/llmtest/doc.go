// Package llmtest is an in-process fake of an OpenAI-compatible server (httptest) for
// /v1/embeddings and /v1/chat/completions: deterministic embeddings, scripted chat answers and
// tool calls (protocol checked), scripted faults (malformed JSON, wrong counts, 429/500, slow).
package llmtest
