// Command memento is Memento's command line: the server (serve) and clients
// of its HTTP API (runs ...). Run `memento help` for the commands.
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "memento:", err)
		os.Exit(1)
	}
}
