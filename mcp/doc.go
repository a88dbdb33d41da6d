// Package mcp is Memento's MCP server: the tools an agent needs (session
// state, messages, memory, context, run checkpoints, documents) over the
// official Go SDK, on streamable HTTP or stdio, each call bound to one
// tenant and user taken from the connection, never from tool arguments.
package mcp
