package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/llm/glove"
	"github.com/mementohq/memento/llm/hashembed"
	"github.com/mementohq/memento/llm/openai"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/memory/extract"
)

// Environment of the model providers; the API key is read from the
// environment only, never from a flag (flags show in process lists).
const (
	envEmbedder       = "MEMENTO_EMBEDDER"
	envExtractor      = "MEMENTO_EXTRACTOR"
	envModelURL       = "MEMENTO_MODEL_URL"
	envModelAPIKey    = "MEMENTO_MODEL_API_KEY"
	envEmbeddingModel = "MEMENTO_EMBEDDING_MODEL"
	envChatModel      = "MEMENTO_CHAT_MODEL"
	envModelProvider  = "MEMENTO_MODEL_PROVIDER"
)

type modelFlags struct {
	embedder, extractor, modelURL, embeddingModel, chatModel, provider string
}

func addModelFlags(cmd *cobra.Command, f *modelFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.embedder, "embedder", "hash", "long-term memory embedder: hash (offline), glove[:FILE] (after memento models install glove) or openai (an OpenAI-compatible /v1/embeddings at --model-url: OpenAI, Ollama, vLLM, TEI) (env "+envEmbedder+")")
	fl.StringVar(&f.extractor, "extractor", "rules", "memory extractor: rules (offline, explicit statements) or llm (an OpenAI-compatible /v1/chat/completions at --model-url) (env "+envExtractor+")")
	fl.StringVar(&f.modelURL, "model-url", "", "base URL of the OpenAI-compatible model server, e.g. https://api.openai.com or http://127.0.0.1:11434 (env "+envModelURL+"; its key comes from "+envModelAPIKey+")")
	fl.StringVar(&f.embeddingModel, "embedding-model", "text-embedding-3-small", "embedding model for --embedder openai (env "+envEmbeddingModel+")")
	fl.StringVar(&f.chatModel, "chat-model", "gpt-4o-mini", "chat model for --extractor llm (env "+envChatModel+")")
	fl.StringVar(&f.provider, "model-provider", "openai", "names the model server in the stored embedding model identity (openai, ollama, vllm, tei...): the same model name elsewhere may be other weights (env "+envModelProvider+")")
}

// memoryOptions builds the memory providers the flags name.
func memoryOptions(cmd *cobra.Command, f modelFlags) (memory.Options, error) {
	var o memory.Options
	embedder := flagOrEnv(cmd, "embedder", f.embedder, envEmbedder, "hash")
	extractor := flagOrEnv(cmd, "extractor", f.extractor, envExtractor, "rules")
	baseURL := flagOrEnv(cmd, "model-url", f.modelURL, envModelURL, "")
	var client *openai.Client
	remote := func(what string) (*openai.Client, error) {
		if client != nil {
			return client, nil
		}
		if baseURL == "" {
			return nil, fmt.Errorf("%s needs --model-url (or %s)", what, envModelURL)
		}
		c, err := openai.New(openai.Config{BaseURL: baseURL, APIKey: os.Getenv(envModelAPIKey), Timeout: 30 * time.Second})
		if err != nil {
			return nil, fmt.Errorf("model server %s: %w", baseURL, err)
		}
		client = c
		return c, nil
	}
	switch name, arg, _ := strings.Cut(embedder, ":"); name {
	case "hash":
		o.Embedder = hashembed.New(hashembed.DefaultDim)
	case "glove":
		path := arg
		if path == "" {
			dir, err := glove.DefaultDir()
			if err != nil {
				return o, fmt.Errorf("embedder glove: %w", err)
			}
			path = glove.Path(dir)
		}
		e, err := glove.Load(path)
		if err != nil {
			return o, fmt.Errorf("embedder glove: %w (install it with `memento models install glove`)", err)
		}
		o.Embedder = e
	case "openai":
		c, err := remote("--embedder openai")
		if err != nil {
			return o, err
		}
		e, err := c.NewEmbedder(openai.EmbedderConfig{Model: flagOrEnv(cmd, "embedding-model", f.embeddingModel, envEmbeddingModel, f.embeddingModel), Provider: flagOrEnv(cmd, "model-provider", f.provider, envModelProvider, f.provider)})
		if err != nil {
			return o, fmt.Errorf("embedder openai: %w", err)
		}
		o.Embedder = e
	default:
		return o, fmt.Errorf("embedder %q: want hash, glove[:FILE] or openai", embedder)
	}
	switch extractor {
	case "rules":
		o.Extractor = extract.Rules{}
	case "llm":
		c, err := remote("--extractor llm")
		if err != nil {
			return o, err
		}
		model := flagOrEnv(cmd, "chat-model", f.chatModel, envChatModel, f.chatModel)
		chat, err := c.NewChat(openai.ChatConfig{Model: model})
		if err != nil {
			return o, fmt.Errorf("extractor llm: %w", err)
		}
		o.Extractor = &extract.LLM{Chat: chatFunc(chat), Model: model}
	default:
		return o, fmt.Errorf("extractor %q: want rules or llm", extractor)
	}
	return o, nil
}

// chatFunc adapts an llm.Chat to the extractor's call: one strict JSON
// schema answer at temperature 0.
func chatFunc(c llm.Chat) extract.ChatFunc {
	return func(ctx context.Context, system, user string, schema json.RawMessage) (string, int, int, error) {
		res, err := c.Complete(ctx, llm.ChatRequest{
			Messages:       []llm.Message{{Role: llm.RoleSystem, Content: system}, {Role: llm.RoleUser, Content: user}},
			ResponseFormat: &llm.ResponseFormat{Name: "memory_candidates", Schema: schema, Strict: true},
			Temperature:    llm.Float64(0),
		})
		if err != nil {
			return "", res.Usage.PromptTokens, res.Usage.CompletionTokens, err
		}
		return res.Content, res.Usage.PromptTokens, res.Usage.CompletionTokens, nil
	}
}
