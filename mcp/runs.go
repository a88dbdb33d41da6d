package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/run"
)

// EventCheckpoint is the event type of a run_checkpoint commit.
const EventCheckpoint = "checkpoint"

type runIn struct {
	Run string `json:"run" jsonschema:"the run's name, chosen by the app (for example giftgenius-anna); names are per user"`
}

type runStartIn struct {
	Run      string         `json:"run" jsonschema:"the run's name, chosen by the app; starting an existing run returns it as it is"`
	Workflow string         `json:"workflow" jsonschema:"the workflow the run belongs to, for example giftgenius"`
	State    map[string]any `json:"state,omitempty" jsonschema:"the initial state (a JSON object)"`
}

type checkpointIn struct {
	Run   string         `json:"run" jsonschema:"the run's name"`
	Label string         `json:"label" jsonschema:"what was reached, for example profile-collected; unique per run"`
	State map[string]any `json:"state" jsonschema:"the run's whole state at this step (a JSON object)"`
	Step  string         `json:"step" jsonschema:"the step the run continues with after this checkpoint"`
}

type restoreIn struct {
	Run   string `json:"run" jsonschema:"the run's name"`
	Label string `json:"label,omitempty" jsonschema:"a checkpoint label; empty restores the latest checkpoint"`
}

type runOut struct {
	Run       string          `json:"run"`
	Workflow  string          `json:"workflow"`
	Status    run.Status      `json:"status"`
	NextStep  string          `json:"next_step"`
	State     json.RawMessage `json:"state"`
	Revision  int64           `json:"revision"`
	UpdatedAt time.Time       `json:"updated_at"`
	Created   *bool           `json:"created,omitempty"`
}

func runView(name string, r run.Run) runOut {
	return runOut{Run: name, Workflow: r.WorkflowName, Status: r.Status, NextStep: r.NextStep, State: r.State, Revision: r.StateRevision, UpdatedAt: r.UpdatedAt}
}

func (t *toolset) runTools(srv *gomcp.Server) {
	svc := t.s.svc.Runs
	add(t, srv, &gomcp.Tool{Name: "run_start", Title: "Start a durable run",
		Description: "Start a durable run of a workflow for this user under a name the app chooses; an existing run of that name is returned as it is (created false), so calling it again is safe.",
		Annotations: &gomcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: ptr(false)}},
		func(ctx context.Context, c call, in runStartIn) (any, error) {
			id, err := RunID(c.User, in.Run)
			if err != nil {
				return nil, err
			}
			var st json.RawMessage
			if in.State != nil {
				if st, err = object("state", in.State); err != nil {
					return nil, err
				}
			}
			if in.Workflow == "" {
				return nil, invalid("workflow is required")
			}
			r, created, err := svc.Create(ctx, c.Tenant, run.CreateRequest{RunID: id, WorkflowName: in.Workflow, WorkflowVersion: "mcp", State: st}, "")
			if errors.Is(err, run.ErrAlreadyExists) {
				if r, err = svc.Get(ctx, c.Tenant, id); err == nil && r.WorkflowName != in.Workflow {
					return nil, invalid("run %s belongs to workflow %s, not %s", in.Run, r.WorkflowName, in.Workflow)
				}
			}
			if err != nil {
				return nil, named(err, id, in.Run)
			}
			v := runView(in.Run, r)
			v.Created = &created
			return v, nil
		})
	add(t, srv, &gomcp.Tool{Name: "run_get", Title: "Read a run",
		Description: "The current state, step and status of one of this user's runs.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, c call, in runIn) (any, error) {
			id, err := RunID(c.User, in.Run)
			if err != nil {
				return nil, err
			}
			r, err := svc.Get(ctx, c.Tenant, id)
			if err != nil {
				return nil, named(err, id, in.Run)
			}
			return runView(in.Run, r), nil
		})
	add(t, srv, &gomcp.Tool{Name: "run_checkpoint", Title: "Checkpoint a run",
		Description: "Record that the run reached a step: the state is committed durably as one event and labelled, so run_restore can bring the work back after a crash or weeks later. The run must exist (run_start).",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(false)}},
		func(ctx context.Context, c call, in checkpointIn) (any, error) {
			id, err := RunID(c.User, in.Run)
			if err != nil {
				return nil, err
			}
			if err := run.ValidID("label", in.Label); err != nil {
				return nil, invalid("%v", err)
			}
			st, err := object("state", in.State)
			if err != nil {
				return nil, err
			}
			res, err := t.checkpoint(ctx, c, in.Run, id, in.Label, in.Step, st)
			return res, named(err, id, in.Run)
		})
	add(t, srv, &gomcp.Tool{Name: "run_restore", Title: "Restore a run from a checkpoint",
		Description: "The state saved at the run's latest checkpoint (or the named one), with its label and step: use it to continue earlier work instead of asking the user again.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, c call, in restoreIn) (any, error) {
			id, err := RunID(c.User, in.Run)
			if err != nil {
				return nil, err
			}
			res, err := t.restore(ctx, c, in.Run, id, in.Label)
			return res, named(err, id, in.Run)
		})
}

// named says a run's errors with the name the user gave it, not the id it
// is stored under (which carries the user's binding); errors.Is and
// errors.As see the error as it was.
func named(err error, id, name string) error {
	if err == nil {
		return nil
	}
	return renamedError{err: err, id: id, name: name}
}

type renamedError struct {
	err      error
	id, name string
}

func (e renamedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.id, e.name) }
func (e renamedError) Unwrap() error { return e.err }

// checkpoint commits state under the run's lease and labels the revision.
// The label is checked under the lease before the commit, so a taken label
// changes nothing.
func (t *toolset) checkpoint(ctx context.Context, c call, name, id, label, step string, st json.RawMessage) (any, error) {
	svc := t.s.svc.Runs
	// Each call holds the lease under its own name, so concurrent
	// checkpoints of one run take turns instead of racing each other's
	// commits (and one call's release never ends another's lease).
	owner := "mcp:" + uuid.NewString()
	var l run.Lease
	wait := 5 * time.Millisecond
	for deadline := time.Now().Add(checkpointWait); ; {
		var err error
		l, err = svc.AcquireLease(ctx, c.Tenant, id, owner, 0, time.Duration(t.s.opts.LeaseTTLSeconds)*time.Second)
		if err == nil {
			break
		}
		if !errors.Is(err, run.ErrLeaseHeld) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, &ToolError{Type: "run-busy", Detail: fmt.Sprintf("run %s is being changed by another call; try again", name)}
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
	defer func() {
		// The lease ends with the call; a failed release only waits out the TTL.
		_ = svc.ReleaseLease(context.WithoutCancel(ctx), c.Tenant, id, l)
	}()
	if _, err := svc.Store().GetCheckpoint(ctx, c.Tenant, id, label); err == nil {
		return nil, &ToolError{Type: "checkpoint-exists", Detail: fmt.Sprintf("run %s already has a checkpoint %q; choose another label", name, label)}
	} else if !errors.Is(err, run.ErrCheckpointNotFound) {
		return nil, err
	}
	payload, _ := json.Marshal(map[string]string{"label": label})
	r, _, err := svc.Commit(ctx, c.Tenant, id, run.CommitRequest{ExpectedRevision: l.Revision, Lease: l,
		Event: run.EventInput{EventType: EventCheckpoint, StepID: label, Payload: payload}, State: st, NextStep: step})
	if err != nil {
		return nil, err
	}
	cp, err := svc.Checkpoint(ctx, c.Tenant, id, label, r.StateRevision)
	if err != nil {
		return nil, err
	}
	return map[string]any{"run": name, "label": cp.Label, "revision": cp.Revision, "next_step": r.NextStep}, nil
}

// checkpointWait bounds how long run_checkpoint waits for another call's
// turn on the same run.
const checkpointWait = 10 * time.Second

// maxCheckpointPages bounds the walk to the latest checkpoint.
const maxCheckpointPages = 100

func (t *toolset) restore(ctx context.Context, c call, name, id, label string) (any, error) {
	st := t.s.svc.Runs.Store()
	var cp run.Checkpoint
	if label != "" {
		got, err := st.GetCheckpoint(ctx, c.Tenant, id, label)
		if err != nil {
			return nil, err
		}
		cp = got
	} else {
		var afterRev int64
		var afterLabel string
		found := false
		for range maxCheckpointPages {
			page, err := st.ListCheckpoints(ctx, c.Tenant, id, afterRev, afterLabel, 100)
			if err != nil {
				return nil, err
			}
			if len(page) == 0 {
				break
			}
			cp, found = page[len(page)-1], true
			afterRev, afterLabel = cp.Revision, cp.Label
			if len(page) < 100 {
				break
			}
		}
		if !found {
			if _, err := st.GetRun(ctx, c.Tenant, id); err != nil {
				return nil, err
			}
			return nil, &ToolError{Type: "checkpoint-not-found", Detail: fmt.Sprintf("run %s has no checkpoint yet", name)}
		}
	}
	ev, err := st.GetEvent(ctx, c.Tenant, id, cp.Revision)
	if err != nil {
		return nil, err
	}
	return map[string]any{"run": name, "label": cp.Label, "revision": cp.Revision, "next_step": ev.NextStep, "state": ev.State, "checkpointed_at": cp.CreatedAt}, nil
}
