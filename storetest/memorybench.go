package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/mementohq/memento/memory"
)

// benchVocabulary is the number of distinct words of BenchClaims' texts.
const benchVocabulary = 5000

var benchSyllables = []string{"ba", "ko", "ri", "me", "tu", "sa", "lo", "ni", "ve", "da", "pu", "ge", "zo", "fi", "ha", "ju"}

// benchWord is the i-th word of the vocabulary: pronounceable, never a
// stop word, so every backend's tokenizer keeps it.
func benchWord(i int) string {
	var b strings.Builder
	b.WriteString("x")
	for {
		b.WriteString(benchSyllables[i%len(benchSyllables)])
		i /= len(benchSyllables)
		if i == 0 {
			break
		}
	}
	return b.String() + "n"
}

// BenchClaims returns n current claims of one subject for full-text
// benchmarks: texts of 8 to 16 words drawn Zipf-like from a vocabulary of
// benchVocabulary words, the same for the same seed.
func BenchClaims(tenantID, subjectID string, n int, seed uint64) []memory.Claim {
	r := rand.New(rand.NewPCG(seed, seed+1))
	z := rand.NewZipf(r, 1.1, 2, benchVocabulary-1)
	base := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	out := make([]memory.Claim, n)
	for i := range out {
		words := make([]string, 8+r.IntN(9))
		for j := range words {
			words[j] = benchWord(int(z.Uint64()))
		}
		at := base.Add(time.Duration(i) * time.Microsecond)
		key := fmt.Sprintf("k%d", i)
		value := json.RawMessage(fmt.Sprintf(`%q`, words[0]))
		out[i] = memory.Claim{
			MemoryID: fmt.Sprintf("mem-%s-%07d", subjectID, i), TenantID: tenantID, SubjectID: subjectID,
			Namespace: "bench", Key: key, Value: value, SchemaVersion: 1, Text: strings.Join(words, " "),
			Provenance: memory.Provenance{SourceType: memory.SourceImport, SourceID: "bench", ValidatedBy: memory.ValidatedImported},
			Confidence: 1, ValidFrom: at, Status: memory.StatusCurrent,
			ValueDigest: memory.ValueDigest("bench", key, value), CreatedAt: at, ConfirmedAt: at,
		}
	}
	return out
}

// BenchQueries are the term lists the full-text benchmarks run: a frequent
// word alone (the most hits to rank), and three words of falling frequency
// (a typical query).
func BenchQueries() []struct {
	Name  string
	Terms []string
} {
	return []struct {
		Name  string
		Terms []string
	}{
		{"common1", []string{benchWord(3)}},
		{"mixed3", []string{benchWord(20), benchWord(300), benchWord(3000)}},
		{"rare2", []string{benchWord(2000), benchWord(4000)}},
	}
}
