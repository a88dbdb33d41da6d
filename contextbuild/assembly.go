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

// assembly is a context being built: its messages, each with the part it
// accounts to and, for parts made of lines, the lines (so that the exact
// final check can drop the last line rather than the whole part).
type assembly struct {
	counter tokens.Counter
	msgs    []llm.Message
	parts   []*builtPart
	acc     Accounting
	total   int
}

type builtPart struct {
	kind   string
	header string
	lines  []line
	msg    int // index in msgs
	part   int // index in acc.Parts
}

// add appends a whole message as one part.
func (a *assembly) add(kind string, m llm.Message, src []string) {
	n := tokens.MessageTokens(a.counter, m)
	if src == nil {
		src = []string{}
	}
	a.msgs = append(a.msgs, m)
	a.acc.Parts = append(a.acc.Parts, Part{Kind: kind, Tokens: n, SourceIDs: src})
	a.parts = append(a.parts, &builtPart{kind: kind, msg: len(a.msgs) - 1, part: len(a.acc.Parts) - 1})
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

// addLines adds one system message of header and the leading lines that fit
// in cap tokens, in order, and records the rest as left out with reason.
// It returns how many lines went in.
func (a *assembly) addLines(kind, header string, lines []line, cap int, reason string) int {
	if len(lines) == 0 {
		return 0
	}
	used := tokens.TokensPerMessage + a.counter.Count(string(llm.RoleSystem)) + a.counter.Count(header+"\n")
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
	a.addLinesMessage(kind, header, lines[:n], used, llm.RoleSystem)
	return n
}

// addLinesMessage appends the message of header and lines, counted as used.
func (a *assembly) addLinesMessage(kind, header string, lines []line, used int, role llm.Role) {
	src := sources(lines)
	a.msgs = append(a.msgs, llm.Message{Role: role, Content: render(header, lines)})
	a.acc.Parts = append(a.acc.Parts, Part{Kind: kind, Tokens: used, SourceIDs: src})
	a.parts = append(a.parts, &builtPart{kind: kind, header: header, lines: append([]line(nil), lines...), msg: len(a.msgs) - 1, part: len(a.acc.Parts) - 1})
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

// dropLast removes the last line of the last part that may be cut (or the
// whole part when it has no lines), recording it as left out, and reports
// whether anything could be dropped. Parts count again exactly.
func (a *assembly) dropLast() bool {
	for i := len(a.parts) - 1; i >= 0; i-- {
		p := a.parts[i]
		switch p.kind {
		case KindSystem, KindTools, KindQuery:
			continue
		}
		if len(p.lines) > 1 {
			last := p.lines[len(p.lines)-1]
			p.lines = p.lines[:len(p.lines)-1]
			a.msgs[p.msg].Content = render(p.header, p.lines)
			a.acc.Parts[p.part].SourceIDs = sources(p.lines)
			a.acc.Parts[p.part].Tokens = tokens.MessageTokens(a.counter, a.msgs[p.msg])
			if last.src != "" {
				a.leave(p.kind, []string{last.src}, "left out by the exact count of the final context")
			}
			return true
		}
		a.leave(p.kind, a.acc.Parts[p.part].SourceIDs, "left out by the exact count of the final context")
		a.removePart(i)
		return true
	}
	return false
}

func (a *assembly) removePart(i int) {
	p := a.parts[i]
	a.msgs = append(a.msgs[:p.msg], a.msgs[p.msg+1:]...)
	a.acc.Parts = append(a.acc.Parts[:p.part], a.acc.Parts[p.part+1:]...)
	a.parts = append(a.parts[:i], a.parts[i+1:]...)
	for _, q := range a.parts {
		if q.msg > p.msg {
			q.msg--
		}
		if q.part > p.part {
			q.part--
		}
	}
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
