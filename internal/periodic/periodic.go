// Package periodic runs a background pass now and then every interval until
// its context ends, reporting each pass: the loop behind run retention and
// the retrieval snapshot purge.
package periodic

import (
	"context"
	"time"
)

// Run calls pass now and then every interval (an hour when <= 0) until ctx
// ends, telling report (when not nil) each pass's count or error, except
// for a pass that ctx's end cut short.
func Run(ctx context.Context, interval time.Duration, pass func(context.Context) (int, error), report func(n int, err error)) {
	if interval <= 0 {
		interval = time.Hour
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := pass(ctx)
		if report != nil && ctx.Err() == nil {
			report(n, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
