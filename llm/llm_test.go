package llm

import (
	"math"
	"testing"
)

func TestNormalize(t *testing.T) {
	v := []float32{3, 4}
	if !Normalize(v) || math.Abs(float64(v[0])-0.6) > 1e-6 || math.Abs(float64(v[1])-0.8) > 1e-6 {
		t.Fatalf("got %v", v)
	}
	z := []float32{0, 0}
	if Normalize(z) || z[0] != 0 || z[1] != 0 {
		t.Fatalf("zero vector: %v", z)
	}
	n := []float32{float32(math.NaN()), 1}
	if Normalize(n) || n[0] != 0 || n[1] != 0 {
		t.Fatalf("NaN vector must become zero: %v", n)
	}
	if d := Dot([]float32{0.6, 0.8}, []float32{0.6, 0.8}); math.Abs(float64(d)-1) > 1e-6 {
		t.Fatalf("dot %v", d)
	}
}
