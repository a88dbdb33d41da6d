package toolop

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/mementohq/memento/run"
)

// List bounds of operation and approval pages.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// pageCursor is the opaque cursor of a page of a run's operations ("o") or
// approvals ("a"): base64url of the keyset position of the last item.
type pageCursor struct {
	K string `json:"k"`
	C int64  `json:"c"`
	I string `json:"i"`
}

func encodePageCursor(kind string, createdAt time.Time, id string) string {
	b, _ := json.Marshal(pageCursor{K: kind, C: createdAt.UnixMicro(), I: id})
	return base64.RawURLEncoding.EncodeToString(b)
}

// page reads a cursor of kind and a limit into a Page asking for one item
// more than limit, which tells whether a next page exists.
func page(kind, cursor string, limit int) (Page, int, error) {
	switch {
	case limit < 0:
		return Page{}, 0, invalid("limit must not be negative")
	case limit == 0:
		limit = DefaultListLimit
	case limit > MaxListLimit:
		// Refused as every other list refuses it, not cut silently.
		return Page{}, 0, invalid("limit must be at most %d", MaxListLimit)
	}
	p := Page{Limit: limit + 1}
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		var c pageCursor
		if err != nil || len(b) > 1024 || json.Unmarshal(b, &c) != nil || c.K != kind || run.ValidID("cursor", c.I) != nil {
			return Page{}, 0, invalid("malformed cursor")
		}
		p.AfterCreatedAt, p.AfterID = time.UnixMicro(c.C).UTC(), c.I
	}
	return p, limit, nil
}
