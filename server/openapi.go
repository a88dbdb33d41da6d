package server

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/mementohq/memento/problem"
)

// The API document is composed at startup from one fragment per domain
// (openapi/<domain>.json: paths and components) on top of openapi/base.json,
// so a domain documents its routes without touching another's file.
//
//go:embed openapi/*.json
var openapiFS embed.FS

const openapiBase = "openapi/base.json"

// fragment is what a domain file may hold.
type fragment struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components map[string]map[string]json.RawMessage `json:"components"`
}

// buildOpenAPI merges the fragments; a path+method or component defined
// twice is an error, so domains cannot silently override each other.
func buildOpenAPI(fsys fs.FS) ([]byte, error) {
	baseRaw, err := fs.ReadFile(fsys, openapiBase)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(baseRaw, &doc); err != nil {
		return nil, fmt.Errorf("openapi: parse %s: %w", openapiBase, err)
	}
	paths := map[string]map[string]json.RawMessage{}
	components := map[string]map[string]json.RawMessage{}
	var base fragment
	if err := json.Unmarshal(baseRaw, &base); err != nil {
		return nil, fmt.Errorf("openapi: parse %s: %w", openapiBase, err)
	}
	files, err := fs.Glob(fsys, "openapi/*.json")
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	sort.Strings(files)
	frags := []struct {
		name string
		f    fragment
	}{{openapiBase, base}}
	for _, name := range files {
		if name == openapiBase {
			continue
		}
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("openapi: %w", err)
		}
		var f fragment
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("openapi: parse %s (only paths and components allowed): %w", path.Base(name), err)
		}
		frags = append(frags, struct {
			name string
			f    fragment
		}{name, f})
	}
	for _, fr := range frags {
		for p, ops := range fr.f.Paths {
			if paths[p] == nil {
				paths[p] = map[string]json.RawMessage{}
			}
			for key, op := range ops {
				if prev, dup := paths[p][key]; dup {
					// Path-level fields (parameters, summary) may be repeated by
					// two domains sharing a path, if they agree; operations never.
					if httpMethods[key] || !sameJSON(prev, op) {
						return nil, fmt.Errorf("openapi: %s %s defined twice (again in %s)", key, p, fr.name)
					}
				}
				paths[p][key] = op
			}
		}
		for section, items := range fr.f.Components {
			if components[section] == nil {
				components[section] = map[string]json.RawMessage{}
			}
			for name, item := range items {
				if _, dup := components[section][name]; dup {
					return nil, fmt.Errorf("openapi: components.%s.%s defined twice (again in %s)", section, name, fr.name)
				}
				components[section][name] = item
			}
		}
	}
	doc["paths"] = paths
	doc["components"] = components
	doc["x-problem-types"] = problemCatalogue()
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("openapi: encode: %w", err)
	}
	return out, nil
}

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}

func sameJSON(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

type problemEntry struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
}

// problemCatalogue lists every problem type the server answers, so clients
// can see the stable kinds in the document itself.
func problemCatalogue() []problemEntry {
	var out []problemEntry
	for k, v := range problem.All() {
		out = append(out, problemEntry{Type: problem.Type(k), Title: v.Title, Status: v.Status})
	}
	slices.SortFunc(out, func(a, b problemEntry) int { return strings.Compare(a.Type, b.Type) })
	return out
}

// documentedQueryParams reads, per route pattern ("DELETE /v1/..."), the
// query parameters the API document gives the operation and its path (an
// empty set when it has none).
func documentedQueryParams(doc []byte) (map[string]map[string]bool, error) {
	type param struct {
		Ref  string `json:"$ref"`
		Name string `json:"name"`
		In   string `json:"in"`
	}
	var d struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]param `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	add := func(set map[string]bool, raw json.RawMessage) error {
		var ps []param
		if len(raw) == 0 {
			return nil
		}
		if err := json.Unmarshal(raw, &ps); err != nil {
			return err
		}
		for _, p := range ps {
			if p.Ref != "" {
				p = d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
			}
			if p.In == "query" {
				set[p.Name] = true
			}
		}
		return nil
	}
	out := map[string]map[string]bool{}
	for path, item := range d.Paths {
		for method, op := range item {
			if !httpMethods[method] {
				continue
			}
			set := map[string]bool{}
			var o struct {
				Parameters json.RawMessage `json:"parameters"`
			}
			if err := json.Unmarshal(op, &o); err != nil {
				return nil, fmt.Errorf("openapi: %s %s: %w", method, path, err)
			}
			if err := errors.Join(add(set, item["parameters"]), add(set, o.Parameters)); err != nil {
				return nil, fmt.Errorf("openapi: parameters of %s %s: %w", method, path, err)
			}
			out[strings.ToUpper(method)+" "+path] = set
		}
	}
	return out, nil
}
