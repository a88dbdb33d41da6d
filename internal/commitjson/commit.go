package commitjson

import (
	"time"

	"github.com/mementohq/memento/run"
)

// AppendRequest appends c as json.Marshal(c) would write it. ok is false
// when c holds something this writer leaves to encoding/json (a string to
// escape, a state to repair); dst's extra bytes are then meaningless.
func AppendRequest(dst []byte, c *run.CommitRequest) ([]byte, bool) {
	w := writer{b: dst, ok: true}
	w.lit(`{"expected_revision":`)
	w.int(c.ExpectedRevision)
	w.lit(`,"lease":{"owner":`)
	w.str(c.Lease.Owner)
	w.lit(`,"epoch":`)
	w.int(c.Lease.Epoch)
	w.lit(`,"expires_at":`)
	w.time(c.Lease.ExpiresAt)
	w.lit(`},"event":{"event_type":`)
	w.str(c.Event.EventType)
	if c.Event.StepID != "" {
		w.lit(`,"step_id":`)
		w.str(c.Event.StepID)
	}
	w.lit(`,"attempt":`)
	w.int(int64(c.Event.Attempt))
	if len(c.Event.Payload) != 0 {
		w.lit(`,"payload":`)
		w.raw(c.Event.Payload)
	}
	w.lit(`},"state":`)
	w.raw(c.State)
	w.lit(`,"next_step":`)
	w.str(c.NextStep)
	if c.Status != "" {
		w.lit(`,"status":`)
		w.str(string(c.Status))
	}
	if c.StatusReason != "" {
		w.lit(`,"status_reason":`)
		w.str(c.StatusReason)
	}
	if c.StateSchemaVersion != 0 {
		w.lit(`,"state_schema_version":`)
		w.int(int64(c.StateSchemaVersion))
	}
	w.lit(`}`)
	return w.b, w.ok
}

// AppendResponse appends the commit response {"run": r, "event": e} as
// json.Marshal writes it; ok as for AppendRequest.
func AppendResponse(dst []byte, r *run.Run, e *run.Event) ([]byte, bool) {
	w := writer{b: dst, ok: true}
	w.lit(`{"run":{"tenant_id":`)
	w.str(r.TenantID)
	w.lit(`,"run_id":`)
	w.str(r.RunID)
	w.lit(`,"workflow_name":`)
	w.str(r.WorkflowName)
	w.lit(`,"workflow_version":`)
	w.str(r.WorkflowVersion)
	w.lit(`,"state_schema_version":`)
	w.int(int64(r.StateSchemaVersion))
	w.lit(`,"status":`)
	w.str(string(r.Status))
	if r.StatusReason != "" {
		w.lit(`,"status_reason":`)
		w.str(r.StatusReason)
	}
	w.lit(`,"next_step":`)
	w.str(r.NextStep)
	w.lit(`,"state":`)
	w.raw(r.State)
	w.lit(`,"state_revision":`)
	w.int(r.StateRevision)
	if r.LeaseOwner != "" {
		w.lit(`,"lease_owner":`)
		w.str(r.LeaseOwner)
	}
	w.lit(`,"lease_epoch":`)
	w.int(r.LeaseEpoch)
	if r.LeaseExpiresAt != nil {
		w.lit(`,"lease_expires_at":`)
		w.time(*r.LeaseExpiresAt)
	}
	if r.ParentRunID != "" {
		w.lit(`,"parent_run_id":`)
		w.str(r.ParentRunID)
	}
	if r.ParentRevision != 0 {
		w.lit(`,"parent_revision":`)
		w.int(r.ParentRevision)
	}
	w.lit(`,"created_at":`)
	w.time(r.CreatedAt)
	w.lit(`,"updated_at":`)
	w.time(r.UpdatedAt)
	w.lit(`},"event":{"seq":`)
	w.int(e.Seq)
	w.lit(`,"event_type":`)
	w.str(e.EventType)
	if e.StepID != "" {
		w.lit(`,"step_id":`)
		w.str(e.StepID)
	}
	w.lit(`,"attempt":`)
	w.int(int64(e.Attempt))
	w.lit(`,"payload":`)
	w.raw(e.Payload)
	w.lit(`,"created_at":`)
	w.time(e.CreatedAt)
	w.lit(`}}`)
	return w.b, w.ok
}

// DecodeRequest decodes a commit request body as a json.Decoder with
// DisallowUnknownFields would, followed by nothing but whitespace. It only
// takes the common shape: field names spelt exactly, each at most once, no
// null, no escapes in strings. ok is false for anything else, valid or not,
// and c is then untouched: decode with encoding/json, which also words the
// errors.
func DecodeRequest(b []byte, c *run.CommitRequest) bool {
	var out run.CommitRequest
	r := reader{b: b}
	ok := r.fields(func(k []byte) (bit uint, ok bool) {
		switch string(k) {
		case "expected_revision":
			bit = 1 << 0
			out.ExpectedRevision, ok = r.int64()
		case "lease":
			bit = 1 << 1
			ok = r.lease(&out.Lease)
		case "event":
			bit = 1 << 2
			ok = r.eventInput(&out.Event)
		case "state":
			bit = 1 << 3
			out.State, ok = r.raw()
		case "next_step":
			bit = 1 << 4
			out.NextStep, ok = r.string()
		case "status":
			bit = 1 << 5
			var s string
			s, ok = r.string()
			out.Status = run.Status(s)
		case "status_reason":
			bit = 1 << 6
			out.StatusReason, ok = r.string()
		case "state_schema_version":
			bit = 1 << 7
			out.StateSchemaVersion, ok = r.int()
		}
		return bit, ok
	})
	if !ok || !r.atEnd() {
		return false
	}
	*c = out
	return true
}

func (r *reader) lease(l *run.Lease) bool {
	return r.fields(func(k []byte) (bit uint, ok bool) {
		switch string(k) {
		case "owner":
			bit = 1 << 0
			l.Owner, ok = r.string()
		case "epoch":
			bit = 1 << 1
			l.Epoch, ok = r.int64()
		case "expires_at":
			bit = 1 << 2
			ok = r.time(&l.ExpiresAt)
		}
		return bit, ok
	})
}

func (r *reader) eventInput(e *run.EventInput) bool {
	return r.fields(func(k []byte) (bit uint, ok bool) {
		switch string(k) {
		case "event_type":
			bit = 1 << 0
			e.EventType, ok = r.string()
		case "step_id":
			bit = 1 << 1
			e.StepID, ok = r.string()
		case "attempt":
			bit = 1 << 2
			e.Attempt, ok = r.int()
		case "payload":
			bit = 1 << 3
			e.Payload, ok = r.raw()
		}
		return bit, ok
	})
}

// DecodeResponse decodes a commit response body {"run": ..., "event": ...}
// as json.Unmarshal would, for the shape the server writes (see
// DecodeRequest for what it leaves to encoding/json; here also any field it
// does not know). ok false leaves r and e untouched.
func DecodeResponse(b []byte, r *run.Run, e *run.Event) bool {
	var (
		outR run.Run
		outE run.Event
	)
	rd := reader{b: b}
	ok := rd.fields(func(k []byte) (bit uint, ok bool) {
		switch string(k) {
		case "run":
			bit = 1 << 0
			ok = rd.run(&outR)
		case "event":
			bit = 1 << 1
			ok = rd.event(&outE)
		}
		return bit, ok
	})
	if !ok || !rd.atEnd() {
		return false
	}
	*r, *e = outR, outE
	return true
}

func (r *reader) run(out *run.Run) bool {
	return r.fields(func(k []byte) (bit uint, ok bool) {
		switch string(k) {
		case "tenant_id":
			bit = 1 << 0
			out.TenantID, ok = r.string()
		case "run_id":
			bit = 1 << 1
			out.RunID, ok = r.string()
		case "workflow_name":
			bit = 1 << 2
			out.WorkflowName, ok = r.string()
		case "workflow_version":
			bit = 1 << 3
			out.WorkflowVersion, ok = r.string()
		case "state_schema_version":
			bit = 1 << 4
			out.StateSchemaVersion, ok = r.int()
		case "status":
			bit = 1 << 5
			var s string
			s, ok = r.string()
			out.Status = run.Status(s)
		case "status_reason":
			bit = 1 << 6
			out.StatusReason, ok = r.string()
		case "next_step":
			bit = 1 << 7
			out.NextStep, ok = r.string()
		case "state":
			bit = 1 << 8
			out.State, ok = r.raw()
		case "state_revision":
			bit = 1 << 9
			out.StateRevision, ok = r.int64()
		case "lease_owner":
			bit = 1 << 10
			out.LeaseOwner, ok = r.string()
		case "lease_epoch":
			bit = 1 << 11
			out.LeaseEpoch, ok = r.int64()
		case "lease_expires_at":
			bit = 1 << 12
			out.LeaseExpiresAt = new(time.Time)
			ok = r.time(out.LeaseExpiresAt)
		case "parent_run_id":
			bit = 1 << 13
			out.ParentRunID, ok = r.string()
		case "parent_revision":
			bit = 1 << 14
			out.ParentRevision, ok = r.int64()
		case "created_at":
			bit = 1 << 15
			ok = r.time(&out.CreatedAt)
		case "updated_at":
			bit = 1 << 16
			ok = r.time(&out.UpdatedAt)
		}
		return bit, ok
	})
}

func (r *reader) event(out *run.Event) bool {
	return r.fields(func(k []byte) (bit uint, ok bool) {
		switch string(k) {
		case "seq":
			bit = 1 << 0
			out.Seq, ok = r.int64()
		case "event_type":
			bit = 1 << 1
			out.EventType, ok = r.string()
		case "step_id":
			bit = 1 << 2
			out.StepID, ok = r.string()
		case "attempt":
			bit = 1 << 3
			out.Attempt, ok = r.int()
		case "payload":
			bit = 1 << 4
			out.Payload, ok = r.raw()
		case "created_at":
			bit = 1 << 5
			ok = r.time(&out.CreatedAt)
		}
		return bit, ok
	})
}

// fields reads an object whose members field decodes: field names the bit of
// a known key and whether its value read well. An unknown key (bit 0, not
// ok), a bad value or a repeated key sends the caller to encoding/json.
func (r *reader) fields(field func(k []byte) (bit uint, ok bool)) bool {
	var seen uint
	return r.object(func(k []byte) bool {
		bit, ok := field(k)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}
