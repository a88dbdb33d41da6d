package memory

// dropCovered removes, in rank order, each hit whose provenance message_ids
// are all named by hits ranked above it: when a conversation is indexed at
// two granularities (turns, and windows of turns), a window and the turns
// inside it are the same evidence, and a second copy only costs the
// caller tokens and a slot of k. Hits without message_ids are kept.
func dropCovered(hits []Hit) []Hit {
	seen := map[string]bool{}
	out := hits[:0]
	for _, h := range hits {
		ids := h.Provenance.MessageIDs
		covered := len(ids) > 0
		for _, id := range ids {
			if !seen[id] {
				covered = false
				break
			}
		}
		if covered {
			continue
		}
		for _, id := range ids {
			seen[id] = true
		}
		out = append(out, h)
	}
	return out
}
