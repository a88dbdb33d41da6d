package memento_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/mementohq/memento/internal/mdcode"
)

var updateGuide = flag.Bool("update-guide", false, "rewrite docs/clients/go.md's program and output from Example")

const goGuide = "docs/clients/go.md"

// TestGoGuide: the program of docs/clients/go.md is Example (example_test.go)
// as a main package, and the output the guide shows is Example's Output, so
// the guide's code is what `go test` runs and checks. -update-guide rewrites
// the guide's blocks from the example.
func TestGoGuide(t *testing.T) {
	program, output := exampleAsProgram(t, "example_test.go", "Example")
	raw, err := os.ReadFile(goGuide)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	blocks := mdcode.Blocks(doc)
	gos, texts := mdcode.Lang(blocks, "go"), mdcode.Lang(blocks, "text")
	if len(gos) != 1 || len(texts) != 1 || texts[0].Start < gos[0].End {
		t.Fatalf("%s: want one go block (the program) followed by one text block (its output), have %d go and %d text blocks", goGuide, len(gos), len(texts))
	}
	if *updateGuide {
		doc = doc[:gos[0].Start] + program + doc[gos[0].End:texts[0].Start] + output + doc[texts[0].End:]
		if err := os.WriteFile(goGuide, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if gos[0].Body != program {
		t.Errorf("%s:%d: the program is not Example of example_test.go (go test -run TestGoGuide -update-guide . rewrites it); want:\n%s", goGuide, gos[0].Line, program)
	}
	if texts[0].Body != output {
		t.Errorf("%s:%d: the output is not Example's Output; want:\n%s", goGuide, texts[0].Line, output)
	}
}

// exampleAsProgram returns the example function name of file as a main
// package (its imports, its body as main's) and its Output comment's text.
func exampleAsProgram(t *testing.T, file, name string) (program, output string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	text := func(from, to token.Pos) string {
		return string(src[fset.Position(from).Offset:fset.Position(to).Offset])
	}
	var imports string
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				imports = text(d.Pos(), d.End())
			}
		case *ast.FuncDecl:
			if d.Name.Name == name {
				fn = d
			}
		}
	}
	if fn == nil || imports == "" {
		t.Fatalf("%s: no imports or no func %s", file, name)
	}
	body := text(fn.Body.Lbrace+1, fn.Body.Rbrace)
	const marker = "\t// Output:\n"
	code, out, ok := strings.Cut(body, marker)
	if !ok {
		t.Fatalf("%s: %s has no %q line", file, name, strings.TrimSpace(marker))
	}
	var lines []string
	for _, l := range strings.SplitAfter(out, "\n") {
		if l = strings.TrimPrefix(strings.TrimPrefix(l, "\t//"), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return "package main\n\n" + imports + "\n\nfunc main() {" + code + "}\n", strings.Join(lines, "")
}
