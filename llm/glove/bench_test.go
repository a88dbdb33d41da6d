package glove

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchFile writes a file of the installed one's shape: 341,479 words of
// 100 float16 values.
func benchFile(b *testing.B) (string, []string) {
	b.Helper()
	const n, dim = 341479, 100
	rng := rand.New(rand.NewPCG(1, 2))
	words := make([]string, n)
	rows := make([][]float32, n)
	flat := make([]float32, n*dim)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
		rows[i] = flat[i*dim : (i+1)*dim]
		for j := range rows[i] {
			rows[i][j] = float32(rng.NormFloat64())
		}
	}
	p := filepath.Join(b.TempDir(), FileName)
	if err := WriteFile(p, Name, Float16, words, rows); err != nil {
		b.Fatal(err)
	}
	sentences := make([]string, 64)
	for i := range sentences {
		var sb strings.Builder
		for k := 0; k < 12; k++ {
			fmt.Fprintf(&sb, "W%d ", rng.IntN(50000)) // words as frequent as a sentence's
		}
		sentences[i] = sb.String()
	}
	return p, sentences
}

// BenchmarkGlove reports the load time of a full-size file and ns per
// embedded 12-word sentence, with the ratio to a baseline measured in the
// same run: lowercasing and splitting the sentence.
func BenchmarkGlove(b *testing.B) {
	path, sentences := benchFile(b)
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			if _, err := Load(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	e, err := Load(path)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	n := 0
	for i := 0; i < 20000; i++ {
		n += len(strings.Fields(strings.ToLower(sentences[i%len(sentences)])))
	}
	base := float64(time.Since(start).Nanoseconds()) / 20000
	b.Run("embed", func(b *testing.B) {
		v := make([]float32, e.Dim())
		for i := 0; b.Loop(); i++ {
			e.EmbedInto(v, sentences[i%len(sentences)])
		}
		per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(per, "ns/sentence")
		b.ReportMetric(per/base, "x-baseline")
	})
	_ = n
}
