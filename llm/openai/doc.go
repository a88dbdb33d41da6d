// Package openai is an HTTP client for OpenAI-compatible /v1/embeddings and
// /v1/chat/completions (OpenAI, Ollama, vLLM, llama.cpp, TEI): bounded calls,
// batching, retries on 429/5xx only, typed errors, validated and normalised vectors.
package openai
