package pii

import (
	"context"
	"fmt"
	"log/slog"
)

// LogHandler masks personal data in log messages and string attributes
// before they reach the wrapped handler, so logs never carry raw values even
// when a caller logs user input by mistake.
type LogHandler struct {
	next slog.Handler
	red  *Redactor
}

// unmasked are attributes that hold generated identifiers, never personal
// data; a UUID's digit groups can look like a phone number.
var unmasked = map[string]bool{"request_id": true, "trace_id": true, "span_id": true}

// NewLogHandler wraps next; a nil redactor means all kinds.
func NewLogHandler(next slog.Handler, r *Redactor) *LogHandler {
	if r == nil || !r.Enabled() {
		r = NewRedactor(Options{})
	}
	return &LogHandler{next: next, red: r}
}

// Enabled implements slog.Handler.
func (h *LogHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *LogHandler) Handle(ctx context.Context, rec slog.Record) error {
	if h.clean(rec) {
		// Masking would change nothing: pass the record on without a copy.
		return h.next.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, h.red.Mask(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.maskAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(as))
	for i, a := range as {
		masked[i] = h.maskAttr(a)
	}
	return &LogHandler{next: h.next.WithAttrs(masked), red: h.red}
}

// WithGroup implements slog.Handler.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{next: h.next.WithGroup(name), red: h.red}
}

// clean reports whether masking would leave rec as it is: no personal data
// in the message or in any string attribute, and no attribute whose value
// needs resolving or formatting first (groups, LogValuers, errors, structs).
func (h *LogHandler) clean(rec slog.Record) bool {
	if len(h.red.Find(rec.Message)) > 0 {
		return false
	}
	clean := true
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Value.Kind() {
		case slog.KindString:
			clean = unmasked[a.Key] || len(h.red.Find(a.Value.String())) == 0
		case slog.KindAny, slog.KindGroup, slog.KindLogValuer:
			clean = false
		}
		return clean
	})
	return clean
}

func (h *LogHandler) maskAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if unmasked[a.Key] {
		return slog.Attr{Key: a.Key, Value: v}
	}
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.red.Mask(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = h.maskAttr(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.red.Mask(err.Error()))
		}
		if s, ok := v.Any().(interface{ String() string }); ok {
			return slog.String(a.Key, h.red.Mask(s.String()))
		}
		// Structured values are logged as is unless their text form holds
		// personal data; then the masked text replaces them.
		if txt := fmt.Sprintf("%+v", v.Any()); len(h.red.Find(txt)) > 0 {
			return slog.String(a.Key, h.red.Mask(txt))
		}
		return slog.Attr{Key: a.Key, Value: v}
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
