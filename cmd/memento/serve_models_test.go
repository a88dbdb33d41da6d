package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/llm/llmtest"
	"github.com/mementohq/memento/memory/extract"
)

func TestServeModelFlags(t *testing.T) {
	parse := func(args ...string) (modelFlags, *cobra.Command) {
		t.Helper()
		var f modelFlags
		cmd := &cobra.Command{Use: "x"}
		addModelFlags(cmd, &f)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return f, cmd
	}
	f, cmd := parse()
	o, err := memoryOptions(cmd, f)
	if err != nil || o.Embedder == nil || o.Embedder.Model() != "memento-hash-v1-256" {
		t.Fatalf("defaults: %v, %+v", err, o)
	}
	if _, ok := o.Extractor.(extract.Rules); !ok {
		t.Fatalf("default extractor = %T", o.Extractor)
	}
	for _, bad := range [][]string{
		{"--embedder", "nope"}, {"--extractor", "magic"}, {"--embedder", "openai"}, {"--extractor", "llm"},
		{"--embedder", "glove:" + filepath.Join(t.TempDir(), "missing.bin")},
	} {
		f, cmd := parse(bad...)
		if _, err := memoryOptions(cmd, f); err == nil {
			t.Fatalf("%v: no error", bad)
		}
	}
	fake := llmtest.New(llmtest.Options{Dim: 8})
	defer fake.Close()
	f, cmd = parse("--embedder", "openai", "--extractor", "llm", "--model-url", fake.URL, "--embedding-model", "m1", "--model-provider", "tei")
	o, err = memoryOptions(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := o.Embedder.Embed(context.Background(), []string{"hello"})
	if err != nil || len(vs) != 1 || len(vs[0]) != 8 || !strings.HasPrefix(o.Embedder.Model(), "tei:m1") {
		t.Fatalf("openai embedder: %v, %d vectors, model %s", err, len(vs), o.Embedder.Model())
	}
	if !strings.HasPrefix(o.Extractor.Name(), "llm:") {
		t.Fatalf("llm extractor name = %s", o.Extractor.Name())
	}
	// The provider comes from the environment too (it had no variable).
	t.Setenv(envModelProvider, "ollama")
	f, cmd = parse("--embedder", "openai", "--model-url", fake.URL, "--embedding-model", "m1")
	if o, err = memoryOptions(cmd, f); err != nil || !strings.HasPrefix(o.Embedder.Model(), "ollama:m1") {
		t.Fatalf("%s=ollama: %v, model %v", envModelProvider, err, o.Embedder)
	}
}
