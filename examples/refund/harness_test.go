package refund_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mementohq/memento/internal/testenv"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/examples/refund"
	"github.com/mementohq/memento/run"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// memento builds the memento binary once per test process, with the crash
// points (MEMENTO_FAULT_POINT) a normal build does not have.
func mementoBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "memento-crash-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "memento")
		out, err := exec.Command("go", "build", "-tags", "memento_crashpoints", "-o", binPath, "github.com/mementohq/memento/cmd/memento").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatalf("build memento: %v", binErr)
	}
	return binPath
}

// lockedBuffer collects a child's output and lets the test wait for a line.
type lockedBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	cond *sync.Cond
}

func newLockedBuffer() *lockedBuffer {
	b := &lockedBuffer{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	b.cond.Broadcast()
	return n, err
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a child process of the test.
type proc struct {
	cmd     *exec.Cmd
	out     *lockedBuffer
	errb    *lockedBuffer
	done    chan struct{}
	waitErr error
}

func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{out: newLockedBuffer(), errb: newLockedBuffer(), done: make(chan struct{})}
	p.cmd = exec.Command(mementoBin(t), args...)
	// A shared backend refuses to start without a vault key.
	p.cmd.Env = append(append(os.Environ(), "MEMENTO_PII_KEY="+testenv.PIIKeyHex), env...)
	// A working directory of its own: nothing a child writes by default
	// (./memento-data) may land in the source tree.
	p.cmd.Dir = t.TempDir()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.errb
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start memento %v: %v", args, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		for _, b := range []*lockedBuffer{p.out, p.errb} {
			b.mu.Lock()
			b.cond.Broadcast()
			b.mu.Unlock()
		}
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// waitFor waits until the buffer holds substr or the process exits or the timeout passes.
func waitFor(p *proc, b *lockedBuffer, substr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer timer.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for !strings.Contains(b.buf.String(), substr) {
		if p.exited() || time.Now().After(deadline) {
			return strings.Contains(b.buf.String(), substr)
		}
		b.cond.Wait()
	}
	return true
}

// wait waits for the process to exit by itself.
func (p *proc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(timeout):
		p.kill()
		t.Fatalf("memento %v did not finish in %s\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], timeout, p.out, tail(p.errb.String(), 4000))
		return nil
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// startPayments runs `memento demo payments` and returns its base URL.
func startPayments(t *testing.T, ledger string) (*proc, string) {
	t.Helper()
	p := start(t, nil, "demo", "payments", "--listen", "127.0.0.1:0", "--ledger", ledger)
	if !waitFor(p, p.out, "\n", 30*time.Second) {
		t.Fatalf("payments did not start: %s %s", p.out, p.errb)
	}
	line := strings.TrimSpace(strings.SplitN(p.out.String(), "\n", 2)[0])
	url := line[strings.LastIndex(line, " ")+1:]
	if !strings.HasPrefix(url, "http://") {
		t.Fatalf("payments printed %q", line)
	}
	return p, url
}

// backend is where the demo keeps its runs.
type backend struct {
	name string
	args []string
	cfg  memento.Config
}

func sqliteBackend(t *testing.T) backend {
	dir := filepath.Join(t.TempDir(), "data")
	return backend{name: "sqlite", args: []string{"--data", dir}, cfg: memento.Config{DataDir: dir}}
}

func postgresBackend(t *testing.T) backend {
	t.Helper()
	url := testenv.PostgresURL(t)
	return backend{name: "postgres", args: []string{"--postgres", url}, cfg: memento.Config{PostgresURL: url, DataDir: t.TempDir(), PII: memento.PIIConfig{Key: testenv.PIIKey}}}
}

// open opens the backend in the test process, to inspect what the demo left.
func (b backend) open(t *testing.T) *memento.Engine {
	t.Helper()
	reg := run.NewRegistry()
	if err := refund.RegisterSchemas(reg); err != nil {
		t.Fatal(err)
	}
	cfg := b.cfg
	cfg.Registry = reg
	cfg.Compaction = refund.CompactionOptions() // as the demo opens it
	e, err := memento.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %s: %v", b.name, err)
	}
	return e
}

// lastLineSummary parses the demo's last stdout line.
func lastLineSummary(t *testing.T, p *proc) refund.Summary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(p.out.String()), "\n")
	var s refund.Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line is not the JSON summary: %q (%v)\nstderr: %s", lines[len(lines)-1], err, tail(p.errb.String(), 3000))
	}
	return s
}

func refunds(t *testing.T, url string) []refund.Refund {
	t.Helper()
	rs, err := refund.NewClient(url).Refunds(context.Background())
	if err != nil {
		t.Fatalf("list refunds: %v", err)
	}
	return rs
}

func events(t *testing.T, e *memento.Engine, runID string) []run.Event {
	t.Helper()
	evs, err := e.Runs.Events(context.Background(), "default", runID, 0, run.MaxListLimit)
	if err != nil {
		t.Fatalf("events of %s: %v", runID, err)
	}
	return evs
}

// services are the engine's services the refund workflow needs.
func services(e *memento.Engine) refund.Services {
	return refund.Services{Runs: e.Runs, Sessions: e.Sessions, Summaries: e.Summaries, Memory: e.Memory, Retrieval: e.Retrieval}
}
