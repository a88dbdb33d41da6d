// Package localschema compiles JSON Schemas that refer only to themselves:
// a $ref to a file or a URL is refused, never loaded. A registered schema
// must not read the server's disk or network, nor change with them.
package localschema

import (
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// NewCompiler returns a compiler whose loader refuses every URL. The
// documents added to it (AddResource) and the JSON Schema meta-schemas,
// which the library embeds, are all it knows.
func NewCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.UseLoader(refuse{})
	return c
}

type refuse struct{}

func (refuse) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the schema: a schema may refer only to itself (#/$defs/...); external references are not loaded", url)
}
