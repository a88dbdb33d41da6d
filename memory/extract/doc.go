// Package extract turns chat messages into candidate memory claims: Rules
// offline for explicit statements, LLM over an OpenAI-compatible chat model.
// The memory Service applies policy to what they propose.
package extract
