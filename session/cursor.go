package session

import (
	"encoding/base64"
	"encoding/json"
	"time"
)

// Cursors are opaque to callers: base64url of a small JSON keyset position.
// "k" names the list a cursor belongs to, so a cursor of one list handed to
// another is refused instead of silently misread.

type listCursor struct {
	K string `json:"k"`
	A int64  `json:"a,omitempty"` // last activity, unix µs (session lists)
	S string `json:"s,omitempty"` // session id (session lists)
	B int64  `json:"b,omitempty"` // before seq (message lists)
}

func encodeCursor(c listCursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s, kind string) (listCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var c listCursor
	if err != nil || len(b) > 1024 || json.Unmarshal(b, &c) != nil || c.K != kind {
		return listCursor{}, invalid("malformed cursor")
	}
	return c, nil
}

func sessionsCursor(last Session) string {
	return encodeCursor(listCursor{K: "s", A: last.LastActivityAt.UnixMicro(), S: last.SessionID})
}

func decodeSessionsCursor(s string) (ListQuery, error) {
	c, err := decodeCursor(s, "s")
	if err != nil {
		return ListQuery{}, err
	}
	if ValidID("cursor session", c.S) != nil {
		return ListQuery{}, invalid("malformed cursor")
	}
	return ListQuery{AfterActivity: time.UnixMicro(c.A).UTC(), AfterSessionID: c.S}, nil
}

func messagesCursor(beforeSeq int64) string {
	return encodeCursor(listCursor{K: "m", B: beforeSeq})
}

func decodeMessagesCursor(s string) (int64, error) {
	c, err := decodeCursor(s, "m")
	if err != nil {
		return 0, err
	}
	if c.B <= 0 {
		return 0, invalid("malformed cursor")
	}
	return c.B, nil
}
