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
