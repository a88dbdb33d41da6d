package memory

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cursors are opaque to callers: the (created_at, memory_id) position of the
// last item of a page.
func encodeCursor(t time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(t.UnixMicro(), 10) + ":" + id))
}

func decodeCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if us, id, ok := strings.Cut(string(b), ":"); ok && id != "" {
			if n, perr := strconv.ParseInt(us, 10, 64); perr == nil && checkID("cursor", id) == nil {
				return time.UnixMicro(n).UTC(), id, nil
			}
		}
	}
	return time.Time{}, "", fmt.Errorf("%w: cursor is not one this server issued", ErrInvalidInput)
}
