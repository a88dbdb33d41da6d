package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/client"
	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/server"
)

// httpBench is a Memento server on a loopback port, in this process, over
// its own engine on the benchmark's PostgreSQL schema, and a Go client.
type httpBench struct {
	eng    *memento.Engine
	dir    string // the engine's data directory, removed by close
	cl     *client.Client
	cancel context.CancelFunc
	done   chan error
	seq    int
	// commitOpts are the client's options on every measured commit.
	commitOpts []client.CallOption
}

// startHTTP serves the API on 127.0.0.1 (an ephemeral port) from an
// engine opened on pgURL, as `memento serve --postgres` would.
func startHTTP(ctx context.Context, pgURL string) (*httpBench, error) {
	// Sessions (not measured) would otherwise open ./memento-data.
	dir, err := os.MkdirTemp("", "memento-bench-server-")
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	// A throwaway vault key: the bench keeps no session beyond its run.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	eng, err := memento.Open(ctx, memento.Config{PostgresURL: pgURL, DataDir: dir, PII: memento.PIIConfig{Key: key}})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("open server engine: %w", err)
	}
	// The server logs every request as `memento serve --log-format json`
	// does, personal data masked; the lines are formatted (that cost is
	// measured) and then discarded.
	log := slog.New(pii.NewLogHandler(slog.NewJSONHandler(io.Discard, nil), nil))
	srv, err := server.New(server.Options{Runs: eng.Runs, Ops: eng.Ops, Sessions: eng.Sessions, Vault: eng.Vault, Summaries: eng.Summaries, Ready: eng.Ready,
		Backend: string(eng.Backend()), MaxStateBytes: eng.Config().MaxStateBytes,
		Logger: log})
	if err != nil {
		_ = eng.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start server: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		_ = eng.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start server: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The stepper needs only the new revision, so it asks for the minimal
	// answer (Prefer: return=minimal), as a client that keeps its own state
	// would, rather than the run and event with the state echoed twice. The
	// commit on the server is the same.
	h := &httpBench{eng: eng, dir: dir, cancel: cancel, done: make(chan error, 1),
		commitOpts: []client.CallOption{client.ReturnMinimal()}}
	go func() { h.done <- srv.Serve(sctx, ln) }()
	h.cl, err = client.New("http://" + ln.Addr().String())
	if err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// close stops the server (draining requests) and then its engine.
func (h *httpBench) close() {
	h.cancel()
	<-h.done
	_ = h.eng.Close()
	_ = os.RemoveAll(h.dir)
}

// target commits through the client, over HTTP, to the server.
func (h *httpBench) target(name string) target {
	return target{name: name, prepare: func(ctx context.Context, n int) ([]stepper, error) {
		h.seq++
		state, _, _, _ := stepInput(0)
		out := make([]stepper, n)
		for i := range out {
			id := "http-" + strconv.Itoa(h.seq) + "-" + strconv.Itoa(i) + "-" + randHex(4)
			r, _, err := h.cl.CreateRun(ctx, run.CreateRequest{
				RunID: id, WorkflowName: "bench", WorkflowVersion: "1", State: state, NextStep: "step-1",
			})
			if err != nil {
				return nil, err
			}
			lease, err := h.cl.AcquireLease(ctx, id, "bench-worker-"+strconv.Itoa(i), leaseTTL)
			if err != nil {
				return nil, err
			}
			rev := r.StateRevision
			out[i] = func(ctx context.Context) error {
				state, payload, stepID, next := stepInput(rev)
				res, err := h.cl.Commit(ctx, id, run.CommitRequest{
					ExpectedRevision: rev, Lease: lease,
					Event: run.EventInput{EventType: EventType, StepID: stepID, Attempt: 1, Payload: payload},
					State: state, NextStep: next,
				}, h.commitOpts...)
				if err != nil {
					return err
				}
				if res.Run.StateRevision != rev+1 {
					return errors.New("commit over HTTP answered revision " + strconv.FormatInt(res.Run.StateRevision, 10) + ", want " + strconv.FormatInt(rev+1, 10))
				}
				rev = res.Run.StateRevision
				return nil
			}
		}
		return out, nil
	}}
}
