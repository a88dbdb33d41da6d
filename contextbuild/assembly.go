package contextbuild

import (
	"fmt"
	"strings"

	"github.com/mementohq/memento/llm"
	"github.com/mementohq/memento/tokens"
)

// line is one entry of a part made of lines (a memory, a summary, a history
// item) and the source it names.
type line struct {
	text string
	src  string
	// tokens is the line's count when the caller has it cached; 0 means
	// count it here.
	tokens int
}

// assembly is a context being built: its messages and their accounting.
type assembly struct {
	counter tokens.Counter
	msgs    []llm.Message
	acc     Accounting
	total   int
}

// add appends a whole message as one part.
func (a *assembly) add(kind string, m llm.Message, src []string) {
	n := tokens.MessageTokens(a.counter, m)
	if src == nil {
		src = []string{}
	}
	a.msgs = append(a.msgs, m)
	a.acc.Parts = append(a.acc.Parts, Part{Kind: kind, Tokens: n, SourceIDs: src})
	a.total += n
}

// leave records what was left out.
func (a *assembly) leave(kind string, src []string, reason string) {
	if len(src) == 0 {
		return
	}
	a.acc.LeftOut = append(a.acc.LeftOut, LeftOut{Kind: kind, SourceIDs: src, Reason: reason})
}

// lineTokens is what a line adds to its message.
func (a *assembly) lineTokens(l line) int {
	if l.tokens > 0 {
		return l.tokens
	}
	return a.counter.Count(l.text + "\n")
}

// roleOf is the role a part's message takes. Text that came from users or
// from outside (history, its summaries, retrieved documents) goes in as a
// user turn, not with the authority of the system prompt, so an
// instruction written in it is not taken for the application's; confirmed
// facts about the user and the state stay system.
func roleOf(kind string) llm.Role {
	switch kind {
	case KindHistory, KindSummary, KindDocuments:
		return llm.RoleUser
	}
	return llm.RoleSystem
}

// addLines adds one message of header and the leading lines that fit in
// cap tokens, in order, and records the rest as left out with reason. It
// returns how many lines went in.
func (a *assembly) addLines(kind, header string, lines []line, cap int, reason string) int {
	if len(lines) == 0 {
		return 0
	}
	used := tokens.TokensPerMessage + a.counter.Count(string(roleOf(kind))) + a.counter.Count(header+"\n")
	n := 0
	for _, l := range lines {
		t := a.lineTokens(l)
		if used+t > cap {
			break
		}
		used += t
		n++
	}
	if n < len(lines) {
		rest := make([]string, 0, len(lines)-n)
		for _, l := range lines[n:] {
			rest = append(rest, l.src)
		}
		a.leave(kind, rest, reason)
	}
	if n == 0 {
		return 0
	}
	a.addLinesMessage(kind, header, lines[:n], used, roleOf(kind))
	return n
}

// addLinesMessage appends the message of header and lines, counted as used.
func (a *assembly) addLinesMessage(kind, header string, lines []line, used int, role llm.Role) {
	src := sources(lines)
	a.msgs = append(a.msgs, llm.Message{Role: role, Content: render(header, lines)})
	a.acc.Parts = append(a.acc.Parts, Part{Kind: kind, Tokens: used, SourceIDs: src})
	a.total += used
}

// sources lists the sources the lines name (a heading line names none).
func sources(lines []line) []string {
	src := make([]string, 0, len(lines))
	for _, l := range lines {
		if l.src != "" {
			src = append(src, l.src)
		}
	}
	return src
}

func render(header string, lines []line) string {
	var b strings.Builder
	b.WriteString(header)
	b.WriteByte('\n')
	for _, l := range lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// addState shows the owner's state when it fits its share.
func (a *assembly) addState(o *owner, cap int) {
	if o.state == "" {
		return
	}
	m := llm.Message{Role: llm.RoleSystem, Content: o.stateLabel + ":\n" + o.state}
	if n := tokens.MessageTokens(a.counter, m); n > cap {
		a.leave(o.stateKind, []string{o.stateSrc}, fmt.Sprintf("takes %d tokens, over its share of %d", n, cap))
		return
	}
	a.add(o.stateKind, m, []string{o.stateSrc})
}
