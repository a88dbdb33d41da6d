package session

import (
	"encoding/json"
	"fmt"
)

// AppendKeys is the list of a session's latest keyed appends, oldest
// first, as the SQL and in-memory stores keep it (encoded by Encode in a
// column of the session's record, so it goes with the session).
type AppendKeys []AppendKeyEntry

// AppendKeyEntry is one remembered keyed append.
type AppendKeyEntry struct {
	Key      string `json:"k"`
	Digest   string `json:"d"`
	FirstSeq int64  `json:"s"`
	Count    int    `json:"n"`
}

// DecodeAppendKeys reads a list Encode wrote ("" or nil: none).
func DecodeAppendKeys(b []byte) (AppendKeys, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var ks AppendKeys
	if err := json.Unmarshal(b, &ks); err != nil {
		return nil, fmt.Errorf("read append keys: %w", err)
	}
	return ks, nil
}

// Encode writes the list.
func (ks AppendKeys) Encode() []byte {
	b, _ := json.Marshal(ks) // strings and integers only
	return b
}

// Use is what a keyed append does with the list: a replay when k was used
// with the same digest, ErrIdempotencyMismatch when with another; else k
// remembered as the append of count messages from firstSeq, in the list
// returned (to store with the append).
func (ks AppendKeys) Use(k AppendKey, firstSeq int64, count int) (AppendKeys, *AppendReplay, error) {
	if rp, err := ks.check(k); rp != nil || err != nil {
		return ks, rp, err
	}
	return ks.add(k, firstSeq, count), nil, nil
}

// check looks k up: a replay when the key was used with the same digest,
// ErrIdempotencyMismatch when with another, (nil, nil) when it is new.
func (ks AppendKeys) check(k AppendKey) (*AppendReplay, error) {
	for _, e := range ks {
		if e.Key != k.Key {
			continue
		}
		if e.Digest != k.Digest {
			return nil, ErrIdempotencyMismatch
		}
		return &AppendReplay{FirstSeq: e.FirstSeq, Count: e.Count}, nil
	}
	return nil, nil
}

// add remembers an append, forgetting the oldest beyond MaxAppendKeys.
func (ks AppendKeys) add(k AppendKey, firstSeq int64, count int) AppendKeys {
	ks = append(ks, AppendKeyEntry{Key: k.Key, Digest: k.Digest, FirstSeq: firstSeq, Count: count})
	if len(ks) > MaxAppendKeys {
		ks = append(AppendKeys(nil), ks[len(ks)-MaxAppendKeys:]...)
	}
	return ks
}
