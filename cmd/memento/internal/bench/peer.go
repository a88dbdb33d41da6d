package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PeerDir is where the DBOS peer's module lives in the source tree.
const PeerDir = "cmd/memento/internal/bench/dbospeer"

// DefaultPeerSteps is the number of no-op steps in each DBOS workflow.
const DefaultPeerSteps = 10

// PeerConfig says how to run the DBOS Transact peer (cmd/memento/internal/bench/dbospeer, its
// own Go module, so Memento's module never depends on DBOS).
type PeerConfig struct {
	Skip bool
	// Bin is a built dbospeer program. If empty, the program is built from
	// Dir with the go command.
	Bin string
	// Dir is the dbospeer module's directory; if empty it is looked for as
	// cmd/memento/internal/bench/dbospeer above the working directory.
	Dir string
	// Steps is the number of no-op steps per workflow (0: DefaultPeerSteps).
	Steps int
}

// PeerInfo describes the peer that was measured.
type PeerInfo struct {
	Name             string `json:"name"`
	Version          string `json:"version"`
	StepsPerWorkflow int    `json:"steps_per_workflow"`
}

type peerRunner struct {
	bin   string
	steps int
	tmp   string // removed by close
	log   io.Writer
}

type peerResult struct {
	info        PeerInfo
	stepsPerSec map[int]float64
}

// preparePeer builds the peer once, before anything is measured.
func preparePeer(ctx context.Context, cfg PeerConfig, log io.Writer) (*peerRunner, error) {
	p := &peerRunner{bin: cfg.Bin, steps: cfg.Steps, log: log}
	if p.steps <= 0 {
		p.steps = DefaultPeerSteps
	}
	if p.bin != "" {
		return p, nil
	}
	dir := cfg.Dir
	if dir == "" {
		var err error
		if dir, err = FindPeerDir(); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp("", "memento-bench-peer-")
	if err != nil {
		return nil, fmt.Errorf("build DBOS peer: %w", err)
	}
	p.tmp = tmp
	p.bin = filepath.Join(tmp, "dbospeer")
	fmt.Fprintf(log, "building the DBOS peer in %s\n", dir)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", p.bin, ".")
	cmd.Dir = dir
	// The peer is its own module: a go.work of the caller must not pull it in.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		p.close()
		return nil, fmt.Errorf("build DBOS peer in %s: %w\n%s", dir, err, out.String())
	}
	return p, nil
}

func (p *peerRunner) close() {
	if p.tmp != "" {
		_ = os.RemoveAll(p.tmp)
	}
}

// run measures the peer at every concurrency: one process, its own schema.
func (p *peerRunner) run(ctx context.Context, pgURL string, conc []int, warmup, d time.Duration) (peerResult, error) {
	cs := make([]string, len(conc))
	for i, c := range conc {
		cs[i] = strconv.Itoa(c)
	}
	cmd := exec.CommandContext(ctx, p.bin,
		"-postgres", pgURL,
		"-duration", d.String(),
		"-warmup", warmup.String(),
		"-steps", strconv.Itoa(p.steps),
		"-concurrency", strings.Join(cs, ","),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return peerResult{}, fmt.Errorf("run DBOS peer: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var rep struct {
		Peer             string `json:"peer"`
		Version          string `json:"version"`
		StepsPerWorkflow int    `json:"steps_per_workflow"`
		Results          []struct {
			Concurrency int     `json:"concurrency"`
			StepsPerSec float64 `json:"steps_per_sec"`
		} `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return peerResult{}, fmt.Errorf("read DBOS peer's report: %w: %q", err, stdout.String())
	}
	res := peerResult{
		info:        PeerInfo{Name: rep.Peer, Version: rep.Version, StepsPerWorkflow: rep.StepsPerWorkflow},
		stepsPerSec: map[int]float64{},
	}
	for _, r := range rep.Results {
		res.stepsPerSec[r.Concurrency] = r.StepsPerSec
	}
	return res, nil
}

// FindPeerDir looks for cmd/memento/internal/bench/dbospeer in the working directory and its
// parents (the source tree of Memento).
func FindPeerDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find DBOS peer: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		cand := filepath.Join(dir, PeerDir)
		if _, err := os.Stat(filepath.Join(cand, "go.mod")); err == nil {
			return cand, nil
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	return "", errors.New("find DBOS peer: no " + PeerDir + "/go.mod in the working directory or its parents; run from Memento's source tree, pass the peer's directory or binary, or skip the peer")
}

// peerProc is a peer started in -serve mode: it measures on request, so
// that DBOS takes its turns among Memento's targets like any other.
type peerProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *bytes.Buffer
	info   PeerInfo
}

// start launches the peer against pgURL and waits until DBOS is ready.
func (p *peerRunner) start(ctx context.Context, pgURL string) (*peerProc, error) {
	cmd := exec.CommandContext(ctx, p.bin, "-serve", "-postgres", pgURL, "-steps", strconv.Itoa(p.steps))
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start DBOS peer: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start DBOS peer: %w", err)
	}
	pp := &peerProc{cmd: cmd, in: in, out: bufio.NewScanner(out), stderr: &bytes.Buffer{}}
	cmd.Stderr = pp.stderr
	// Leave time to drop its schema when asked to stop.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start DBOS peer: %w", err)
	}
	var ready struct {
		Ready            bool   `json:"ready"`
		Peer             string `json:"peer"`
		Version          string `json:"version"`
		StepsPerWorkflow int    `json:"steps_per_workflow"`
	}
	if err := pp.read(&ready); err != nil || !ready.Ready {
		pp.stop()
		return nil, fmt.Errorf("start DBOS peer: not ready: %v: %s", err, strings.TrimSpace(pp.stderr.String()))
	}
	pp.info = PeerInfo{Name: ready.Peer, Version: ready.Version, StepsPerWorkflow: ready.StepsPerWorkflow}
	return pp, nil
}

func (pp *peerProc) read(v any) error {
	if !pp.out.Scan() {
		if err := pp.out.Err(); err != nil {
			return err
		}
		return io.ErrUnexpectedEOF
	}
	return json.Unmarshal(pp.out.Bytes(), v)
}

// measure asks the peer for steps recorded in d at concurrency c.
func (pp *peerProc) measure(c int, d time.Duration) (int64, time.Duration, error) {
	if _, err := fmt.Fprintf(pp.in, "measure %d %s\n", c, d); err != nil {
		return 0, 0, fmt.Errorf("DBOS peer: %w: %s", err, strings.TrimSpace(pp.stderr.String()))
	}
	var r struct {
		Steps   int64   `json:"steps"`
		Seconds float64 `json:"seconds"`
	}
	if err := pp.read(&r); err != nil {
		return 0, 0, fmt.Errorf("DBOS peer: %w: %s", err, strings.TrimSpace(pp.stderr.String()))
	}
	return r.Steps, time.Duration(r.Seconds * float64(time.Second)), nil
}

// stop closes the peer's input: it shuts DBOS down, drops its schema and exits.
func (pp *peerProc) stop() {
	_ = pp.in.Close()
	_ = pp.cmd.Wait()
}

// target makes the peer one of the targets measured in turns.
func (pp *peerProc) target() target {
	return target{name: TargetDBOS, open: func(ctx context.Context, c int) (sliceFunc, error) {
		return func(ctx context.Context, d time.Duration) (int64, time.Duration, error) {
			return pp.measure(c, d)
		}, nil
	}}
}
