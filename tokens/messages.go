package tokens

import "github.com/mementohq/memento/llm"

// OpenAI's accounting of chat messages (gpt-3.5-turbo-0613 and later, gpt-4,
// gpt-4o, o-series): every message costs 3 tokens of framing plus its role and
// content, a name 1 more, and the reply is primed with 3 tokens.
const (
	TokensPerMessage = 3
	TokensPerName    = 1
	ReplyPriming     = 3
)

// MessageTokens counts one chat message with its framing. Tool calls count
// their name and arguments text plus the message framing each; OpenAI does
// not publish that accounting, so with tool calls the count is an estimate
// even on an exact counter.
func MessageTokens(c Counter, m llm.Message) int {
	n := TokensPerMessage + c.Count(string(m.Role)) + c.Count(m.Content)
	if m.Name != "" {
		n += TokensPerName + c.Count(m.Name)
	}
	for _, tc := range m.ToolCalls {
		n += TokensPerMessage + c.Count(tc.Name) + c.Count(tc.Arguments)
	}
	if m.ToolCallID != "" {
		n += c.Count(m.ToolCallID)
	}
	return n
}

// ChatTokens counts the prompt tokens of a conversation as the chat
// completion API bills them: each message with its framing, plus the
// reply priming. Tool definitions are not included.
func ChatTokens(c Counter, msgs []llm.Message) int {
	if len(msgs) == 0 {
		return 0
	}
	n := ReplyPriming
	for _, m := range msgs {
		n += MessageTokens(c, m)
	}
	return n
}
