package compact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// The scanner finds the items that must travel as structure (Carried) in
// event payloads and message text. It is deterministic and shared by every
// compactor: an LLM compactor's answer is merged with it, so a model that
// forgets an operation id or an amount cannot drop it from a summary.

var (
	decimalRe  = regexp.MustCompile(`^-?\d+(\.\d+)?$`)
	currencyRe = regexp.MustCompile(`^[A-Z]{3}$`)

	num       = `(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)`
	codes     = `(USD|EUR|GBP|JPY|CHF|CAD|AUD|NZD|CNY|INR|SEK|NOK|DKK|PLN|CZK|BRL|MXN|ZAR|SGD|HKD)`
	symbolRe  = regexp.MustCompile(`([$€£¥])\s?` + num)
	codeAfter = regexp.MustCompile(`\b` + num + `\s?` + codes + `\b`)
	codeFirst = regexp.MustCompile(`\b` + codes + `\s?` + num)
	wordAfter = regexp.MustCompile(`(?i)\b` + num + `\s(dollars?|euros?|pounds?|yen)\b`)

	negationRe = regexp.MustCompile(`(?i)\b(no longer|never|not|cannot|(?:do|does|did|is|are|was|were|wo|ca|should|must|could|would|has|have|had)n['’]t)\b`)

	opTextRe       = regexp.MustCompile(`(?i)\boperation[ _-]?id\s*[:=]?\s*["']?([A-Za-z0-9][A-Za-z0-9._:-]{1,127})`)
	approvalTextRe = regexp.MustCompile(`(?i)\bapproval[ _-]?id\s*[:=]?\s*["']?([A-Za-z0-9][A-Za-z0-9._:-]{1,127})`)

	decisionTextRe = regexp.MustCompile(`(?i)\b(decided|decide to|we will|we'll|let's|agreed|going with|i'll take|chose|approved|rejected)\b`)
	sentenceEnd    = regexp.MustCompile(`([.!?])\s+|\n+`)
)

var symbolCurrency = map[string]string{"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}

var wordCurrency = map[string]string{"dollar": "USD", "dollars": "USD", "euro": "EUR", "euros": "EUR", "pound": "GBP", "pounds": "GBP", "yen": "JPY"}

// collector gathers carried items, merging repeats of one id.
type collector struct {
	ops       map[string]*Operation
	approvals map[string]*Approval
	calls     map[string]*ToolCall // by call id ("" ids are kept in anon)
	anon      []ToolCall
	resolved  map[string]bool
	amounts   map[string]*Amount // by value, currency, seq
	negations []Negation
	decisions []Decision
	order     []string // first-seen order of keys, for a stable output
}

func newCollector() *collector {
	return &collector{ops: map[string]*Operation{}, approvals: map[string]*Approval{}, calls: map[string]*ToolCall{},
		resolved: map[string]bool{}, amounts: map[string]*Amount{}}
}

func addSeq(seqs []int64, seq int64) []int64 {
	if slices.Contains(seqs, seq) {
		return seqs
	}
	return append(seqs, seq)
}

func (c *collector) operation(id, status string, seq int64) {
	o, ok := c.ops[id]
	if !ok {
		o = &Operation{OperationID: id}
		c.ops[id] = o
		c.order = append(c.order, "op:"+id)
	}
	if status != "" {
		o.Status = status
	}
	o.SourceSeqs = addSeq(o.SourceSeqs, seq)
}

func (c *collector) approval(id, status string, seq int64) {
	a, ok := c.approvals[id]
	if !ok {
		a = &Approval{ApprovalID: id}
		c.approvals[id] = a
		c.order = append(c.order, "ap:"+id)
	}
	if status != "" {
		a.Status = status
	}
	a.SourceSeqs = addSeq(a.SourceSeqs, seq)
}

func (c *collector) amount(value, currency, text string, seq int64) {
	value = strings.ReplaceAll(value, ",", "")
	if !decimalRe.MatchString(value) || (currency != "" && !currencyRe.MatchString(currency)) {
		return
	}
	k := fmt.Sprintf("%s %s %d", value, currency, seq)
	if _, ok := c.amounts[k]; ok {
		return
	}
	c.amounts[k] = &Amount{Value: value, Currency: currency, Text: text, SourceSeqs: []int64{seq}}
	c.order = append(c.order, "am:"+k)
}

func (c *collector) call(id, name, args string, seq int64) {
	if name == "" {
		return
	}
	if id == "" {
		c.anon = append(c.anon, ToolCall{ToolName: name, Arguments: args, SourceSeqs: []int64{seq}})
		return
	}
	if _, ok := c.calls[id]; !ok {
		c.calls[id] = &ToolCall{CallID: id, ToolName: name, Arguments: args, SourceSeqs: []int64{seq}}
		c.order = append(c.order, "tc:"+id)
	}
}

// carried returns what was collected, in first-seen order.
func (c *collector) carried() Carried {
	var out Carried
	for _, k := range c.order {
		kind, id := k[:3], k[3:]
		switch kind {
		case "op:":
			out.Operations = append(out.Operations, *c.ops[id])
		case "ap:":
			out.Approvals = append(out.Approvals, *c.approvals[id])
		case "am:":
			out.Amounts = append(out.Amounts, *c.amounts[id])
		case "tc:":
			if !c.resolved[id] {
				out.PendingToolCalls = append(out.PendingToolCalls, *c.calls[id])
			}
		}
	}
	out.PendingToolCalls = append(out.PendingToolCalls, c.anon...)
	out.Negations = c.negations
	out.normalize()
	return out
}

// scanItem collects the structured items of one log entry.
func (c *collector) scanItem(it Item) {
	if it.Text != "" {
		c.scanText(it.Seq, it.Text)
	}
	if len(it.Payload) == 0 {
		return
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(it.Payload))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return
	}
	if it.Text != "" {
		// A message's payload is {"content", "metadata"}: the content was
		// scanned as text; only the metadata carries structure.
		if m, ok := v.(map[string]any); ok {
			v = m["metadata"]
		}
	}
	c.walk(it, v, "")
}

// lastStatus is what an event type says of the thing it is about:
// "operation.succeeded" -> "succeeded".
func lastStatus(eventType string) string {
	if i := strings.LastIndexAny(eventType, "._"); i >= 0 && i+1 < len(eventType) {
		return eventType[i+1:]
	}
	return ""
}

func str(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func (c *collector) walk(it Item, v any, key string) {
	switch x := v.(type) {
	case map[string]any:
		c.object(it, x)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c.walk(it, x[k], k)
		}
	case []any:
		for _, e := range x {
			c.walk(it, e, key)
		}
	case string:
		if key != "operation_id" && key != "approval_id" && key != "tool_call_id" {
			c.scanText(it.Seq, x)
		}
	}
}

func (c *collector) object(it Item, m map[string]any) {
	lt := strings.ToLower(it.Type)
	if id := str(m, "operation_id"); id != "" {
		st := str(m, "status", "outcome")
		if st == "" && strings.Contains(lt, "operation") {
			st = lastStatus(lt)
		}
		c.operation(id, st, it.Seq)
	}
	if id := str(m, "approval_id"); id != "" {
		st := str(m, "status", "decision")
		if st == "" && strings.Contains(lt, "approval") {
			st = lastStatus(lt)
		}
		c.approval(id, st, it.Seq)
		if st == "approved" || st == "rejected" || st == "denied" {
			c.decisions = append(c.decisions, Decision{Code: "approval." + st, Text: fmt.Sprintf("approval %s %s", id, st), SourceSeqs: []int64{it.Seq}})
		}
	}
	// Members that name money are amounts with or without a currency (the
	// refund example commits {"amount": 1999}); "value" only beside one.
	cur := strings.ToUpper(str(m, "currency"))
	money := []string{"amount", "total", "price"}
	if cur != "" {
		money = append(money, "value")
	}
	for _, k := range money {
		if n, ok := m[k].(json.Number); ok {
			c.amount(n.String(), cur, strings.TrimSpace(fmt.Sprintf("%s %s %s", k, n, cur)), it.Seq)
		} else if s, ok := m[k].(string); ok && cur != "" {
			c.amount(s, cur, fmt.Sprintf("%s %s %s", k, s, cur), it.Seq)
		}
	}
	for _, k := range []string{"amount_cents", "amount_minor", "cents"} {
		if n, ok := m[k].(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				c.amount(centsString(i), cur, strings.TrimSpace(fmt.Sprintf("%s %d %s", k, i, cur)), it.Seq)
			}
		}
	}
	// OpenAI-style tool calls: [{id, function: {name, arguments}}] or {id, name, arguments}.
	if calls, ok := m["tool_calls"].([]any); ok {
		for _, e := range calls {
			tc, ok := e.(map[string]any)
			if !ok {
				continue
			}
			name, args := str(tc, "name", "tool_name"), str(tc, "arguments")
			if fn, ok := tc["function"].(map[string]any); ok {
				name, args = str(fn, "name"), str(fn, "arguments")
			}
			c.call(str(tc, "id", "call_id"), name, args, it.Seq)
		}
	}
	if id := str(m, "tool_call_id"); id != "" {
		c.resolved[id] = true
	}
	// A tool call as an event: {tool_name|tool, call_id|id|operation_id}
	// whose status (or else event type) says requested or started; a
	// later one naming the same id with a final status resolves it.
	if name := str(m, "tool_name", "tool"); name != "" {
		id := str(m, "call_id", "tool_call_id", "operation_id", "id")
		st := strings.ToLower(str(m, "status", "state"))
		if st == "" {
			st = lt
		}
		switch {
		case hasAny(st, "result", "response", "succeeded", "success", "failed", "completed", "done", "cancelled", "canceled"):
			if id != "" {
				c.resolved[id] = true
			}
		case hasAny(st, "call", "request", "started", "prepared", "pending", "unknown", "running"):
			args := ""
			if a, ok := m["arguments"]; ok {
				if s, ok := a.(string); ok {
					args = s
				} else if b, err := json.Marshal(a); err == nil {
					args = string(b)
				}
			}
			c.call(id, name, args, it.Seq)
		}
	}
	if d := str(m, "decision"); d != "" && str(m, "approval_id") == "" {
		c.decisions = append(c.decisions, Decision{Code: d, Text: fmt.Sprintf("%s: %s", it.Type, d), SourceSeqs: []int64{it.Seq}})
	}
}

func hasAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

func centsString(i int64) string {
	sign := ""
	if i < 0 {
		sign, i = "-", -i
	}
	return fmt.Sprintf("%s%d.%02d", sign, i/100, i%100)
}

// scanText collects amounts, ids and negations written in prose.
func (c *collector) scanText(seq int64, text string) {
	for _, m := range symbolRe.FindAllStringSubmatch(text, -1) {
		c.amount(m[2], symbolCurrency[m[1]], m[0], seq)
	}
	for _, m := range codeAfter.FindAllStringSubmatch(text, -1) {
		c.amount(m[1], m[2], m[0], seq)
	}
	for _, m := range codeFirst.FindAllStringSubmatch(text, -1) {
		c.amount(m[2], m[1], m[0], seq)
	}
	for _, m := range wordAfter.FindAllStringSubmatch(text, -1) {
		c.amount(m[1], wordCurrency[strings.ToLower(m[2])], m[0], seq)
	}
	for _, m := range opTextRe.FindAllStringSubmatch(text, -1) {
		c.operation(strings.TrimRight(m[1], ".:"), "", seq)
	}
	for _, m := range approvalTextRe.FindAllStringSubmatch(text, -1) {
		c.approval(strings.TrimRight(m[1], ".:"), "", seq)
	}
	for _, s := range splitSentences(text) {
		if m := negationRe.FindString(s); m != "" {
			c.negations = append(c.negations, Negation{Cue: strings.ToLower(m), Text: s, SourceSeqs: []int64{seq}})
		}
	}
}

// splitSentences cuts text after . ! ? followed by space, and at line breaks.
func splitSentences(text string) []string {
	var out []string
	start := 0
	for _, loc := range sentenceEnd.FindAllStringSubmatchIndex(text, -1) {
		end := loc[1]
		if loc[2] >= 0 {
			end = loc[3] // keep the punctuation
		} else {
			end = loc[0]
		}
		if s := strings.TrimSpace(text[start:end]); s != "" {
			out = append(out, s)
		}
		start = loc[1]
	}
	if s := strings.TrimSpace(text[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// Scan returns the carried items of items, as every compactor carries them.
func Scan(items []Item) Carried {
	c := newCollector()
	for _, it := range items {
		c.scanItem(it)
	}
	return c.carried()
}
