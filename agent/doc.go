// Package agent is a Go agent loop over Memento's tools: per turn it loads the session, builds the
// context under a budget, lets an OpenAI-compatible model call tools (MCP or local Go functions),
// checkpoints at the steps the app marks, and answers. A scripted model runs it offline.
package agent
