// Package llm holds the model-provider interfaces long-term memory, extraction and
// compaction use (Embedder, Chat) and small helpers shared by their implementations:
// llm/openai (HTTP), llm/hashembed and llm/glove (offline), llm/llmtest (a fake server).
package llm
