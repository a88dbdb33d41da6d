package mdcode

import "strings"

// Block is one fenced code block (``` fences at the start of a line).
type Block struct {
	// Lang is the first word of the info string ("sh", "json", "go", "text").
	Lang string
	// Info is the whole info string after the opening fence.
	Info string
	// Body is the text between the fences, each line ending in "\n".
	Body string
	// Line is the 1-based line of the opening fence.
	Line int
	// Start and End are the byte offsets of Body in the document.
	Start, End int
}

// Blocks returns the fenced code blocks of doc in order. An unclosed block
// runs to the end of doc.
func Blocks(doc string) []Block {
	var (
		out  []Block
		cur  *Block
		line int
	)
	for off := 0; off < len(doc); {
		end := strings.IndexByte(doc[off:], '\n')
		next := len(doc)
		if end >= 0 {
			next = off + end + 1
		}
		text := strings.TrimRight(doc[off:next], "\r\n")
		line++
		switch {
		case cur == nil && strings.HasPrefix(text, "```"):
			info := strings.TrimSpace(strings.TrimPrefix(text, "```"))
			lang, _, _ := strings.Cut(info, " ")
			cur = &Block{Lang: lang, Info: info, Line: line, Start: next}
		case cur != nil && strings.TrimSpace(text) == "```":
			cur.End = off
			cur.Body = doc[cur.Start:cur.End]
			out = append(out, *cur)
			cur = nil
		}
		off = next
	}
	if cur != nil {
		cur.End = len(doc)
		cur.Body = doc[cur.Start:]
		out = append(out, *cur)
	}
	return out
}

// Lang returns the blocks of one language, in order.
func Lang(blocks []Block, lang string) []Block {
	var out []Block
	for _, b := range blocks {
		if b.Lang == lang {
			out = append(out, b)
		}
	}
	return out
}
