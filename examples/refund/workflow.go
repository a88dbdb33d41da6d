package refund

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mementohq/memento/compact"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
	"github.com/mementohq/memento/toolop"
	"github.com/mementohq/memento/workflow"
	"github.com/mementohq/memento/workflow/control"
)

// Names of the workflow, its tool and its steps.
const (
	WorkflowName    = "refund"
	WorkflowVersion = "1"
	SchemaVersion   = 2
	ToolName        = "payments.refund"
	ToolContract    = "payments-v1"

	StepLookup     = "lookup_order"
	StepReadDialog = "read_dialog"
	StepRecall     = "recall_preference"
	StepPolicy     = "retrieve_policy"
	StepDecide     = "decide"
	StepRemember   = "remember_preference"
	StepApprove    = "approve"
	StepRefund     = "refund"
	StepVerify     = "verify"
)

// Test points of the refund workflow (workflow.At), beside the engine's
// fault points: a test holds the worker there, to change something under
// it or to SIGKILL it (MEMENTO_FAULT_POINT). Production calls no hook.
const (
	// PointBeforeDecide: the dialog is summarised, the decision not made.
	PointBeforeDecide = "before_decide"
	// PointBeforeRefund: the approval is committed, the refund not prepared.
	PointBeforeRefund = "before_refund"
)

// Outcomes a run ends with (state field "outcome").
const (
	OutcomeRefunded = "refunded"
	OutcomeRejected = "rejected"
)

// Decision is what the (offline) model decided; once committed it is never
// decided again, which DecisionID makes visible.
type Decision struct {
	Refund      bool   `json:"refund"`
	AmountCents int64  `json:"amount_cents"`
	Reason      string `json:"reason"`
	DecisionID  string `json:"decision_id"`
	// RefundTo is how the money goes back, and RefundToSource where that
	// came from (SourceDialog, SourceMemory, SourceDefault).
	RefundTo       string `json:"refund_to,omitempty"`
	RefundToSource string `json:"refund_to_source,omitempty"`
	// Context says what the decision read, so it can be reproduced.
	Context *DecisionContext `json:"context,omitempty"`
}

// DecisionContext is the provenance of a decision's inputs.
type DecisionContext struct {
	// Summaries are the dialog summaries read in place of their messages;
	// SummaryFallback says why a part of the dialog was read raw instead.
	Summaries       []string `json:"summaries"`
	SummaryFallback string   `json:"summary_fallback,omitempty"`
	// RawFrom..RawTo are the recent dialog messages read raw.
	RawFrom int64 `json:"raw_from"`
	RawTo   int64 `json:"raw_to"`
	// ClaimedAmount is the amount the customer wrote, with its message seqs.
	ClaimedAmount string  `json:"claimed_amount,omitempty"`
	ClaimedSeqs   []int64 `json:"claimed_seqs,omitempty"`
	// Policy is the policy chunk the decision followed.
	Policy PolicyRef `json:"policy"`
	// MemoryID is the long-term claim the refund method came from, if any.
	MemoryID string `json:"memory_id,omitempty"`
	// Tokens is what the decision's context cost, by DialogModel's tokenizer.
	Tokens int `json:"tokens"`
}

// RunID is the run of one order: one run per order, so starting twice never doubles it.
func RunID(orderID string) string { return "refund-" + orderID }

// OrderID is the n-th demo order.
func OrderID(n int) string { return fmt.Sprintf("order-%04d", n) }

// BusinessKey names the refund of an order; the operation id derives from it.
func BusinessKey(orderID string) string { return "refund:" + orderID }

// Input is the initial state of a run.
type Input struct {
	OrderID string `json:"order_id"`
}

// Options tune the workflow.
type Options struct {
	// ApprovalTTL is how long an approval stays usable (default 1h).
	ApprovalTTL time.Duration
}

// Services are what the workflow reads and writes besides the payments
// service: the run's own events (for provenance), the customer dialog
// (sessions), its summaries, long-term memory and retrieval. Every one is
// required; memento.Engine has them all.
type Services struct {
	Runs      *run.Service
	Sessions  *session.Service
	Summaries *compact.Service
	Memory    *memory.Service
	Retrieval *retrieval.Service
}

// Check reports a missing service.
func (s Services) Check() error {
	if s.Runs == nil || s.Sessions == nil || s.Summaries == nil || s.Memory == nil || s.Retrieval == nil {
		return errors.New("refund workflow: runs, sessions, summaries, memory and retrieval are all required")
	}
	return nil
}

// Tool is the payments tool with its authoritative lookup by idempotency key.
func Tool(c *Client) toolop.Tool {
	return toolop.Tool{Name: ToolName, ContractVersion: ToolContract, Lookup: c.Lookup}
}

func refundRequest(sc *workflow.StepContext) (RefundRequest, error) {
	var o Order
	var d Decision
	if _, err := sc.Get("order", &o); err != nil {
		return RefundRequest{}, err
	}
	if _, err := sc.Get("decision", &d); err != nil {
		return RefundRequest{}, err
	}
	return RefundRequest{OrderID: o.OrderID, AmountCents: d.AmountCents, Currency: o.Currency}, nil
}

// Workflow builds the refund workflow against a payments client:
//
//	lookup_order         the order, from the payments service
//	read_dialog          the customer dialog: older messages summarised (a cache), a confirmed preference found
//	recall_preference    the customer's kept refund method, from long-term memory
//	retrieve_policy      the refund policy, retrieved as the agent, with provenance
//	decide               the (offline) model's decision, from summary + recent messages + preference + policy
//	remember_preference  a preference confirmed in this dialog, kept long term with provenance
//	approve              an approval for the exact refund request
//	refund               the refund, once, through the operation ledger
//	verify               the refund checked against the provider
func Workflow(c *Client, svc Services, opts Options) workflow.Workflow {
	if opts.ApprovalTTL <= 0 {
		opts.ApprovalTTL = time.Hour
	}
	return workflow.Workflow{
		Name: WorkflowName, Version: WorkflowVersion, SchemaVersion: SchemaVersion,
		Budget: control.Budget{MaxSteps: 20, MaxTokens: 20000, MaxCostMicros: 200000},
		Steps: []workflow.Step{
			{Name: StepLookup, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				var id string
				if _, err := sc.Get("order_id", &id); err != nil || id == "" {
					return fmt.Errorf("state has no order_id: %v", err)
				}
				o, err := c.Order(ctx, id)
				if err != nil {
					return err
				}
				return sc.Set("order", o)
			}},
			{Name: StepReadDialog, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				var o Order
				if _, err := sc.Get("order", &o); err != nil {
					return err
				}
				ref, err := compactDialog(ctx, svc.Summaries, sc.TenantID(), DialogSession(o.OrderID), o.Customer)
				if err != nil {
					return err
				}
				p, err := findPreference(ctx, svc.Summaries, sc.TenantID(), ref.Owner())
				if err != nil {
					return err
				}
				if p != nil {
					if err := sc.Set("preference_candidate", p); err != nil {
						return err
					}
				}
				return sc.Set("dialog", ref)
			}},
			{Name: StepRecall, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				var o Order
				if _, err := sc.Get("order", &o); err != nil {
					return err
				}
				p, err := recallPreference(ctx, svc.Memory, sc.TenantID(), o.Customer)
				if err != nil || p == nil {
					return err
				}
				return sc.Set("preference", p)
			}},
			{Name: StepPolicy, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				ref, ok, err := retrievePolicy(ctx, svc.Retrieval, sc.TenantID())
				if err != nil {
					return err
				}
				if !ok {
					// Deciding without the policy would be guessing: an operator looks.
					return workflow.Suspend(fmt.Sprintf("no refund policy readable by %s (snapshot %s)", AgentPrincipal, ref.SnapshotID))
				}
				return sc.Set("policy", ref)
			}},
			{Name: StepDecide, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				workflow.At(ctx, PointBeforeDecide, sc.RunID())
				// Stands in for a model call: it reads the dialog (summary
				// and recent messages), the kept preference and the policy,
				// costs tokens, and its answer is committed so that no resume
				// ever asks the model again.
				var o Order
				if _, err := sc.Get("order", &o); err != nil {
					return err
				}
				var ref DialogRef
				var pol PolicyRef
				if _, err := sc.Get("dialog", &ref); err != nil {
					return err
				}
				if _, err := sc.Get("policy", &pol); err != nil {
					return err
				}
				view, err := readDialog(ctx, svc.Summaries, sc.TenantID(), ref)
				if err != nil {
					return err
				}
				text, err := policyText(ctx, svc.Retrieval, sc.TenantID(), pol)
				if err != nil {
					return err
				}
				var cand *preferenceCandidate
				var kept *Preference
				if _, err := sc.Get("preference_candidate", &cand); err != nil {
					return err
				}
				if _, err := sc.Get("preference", &kept); err != nil {
					return err
				}
				d := decide(o, view, text, cand, kept)
				d.DecisionID = uuid.NewString()
				d.Context.Policy = pol
				sc.Spend(int64(d.Context.Tokens), 2*int64(d.Context.Tokens))
				return sc.Set("decision", d)
			}},
			{Name: StepRemember, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				var cand *preferenceCandidate
				var o Order
				var ref DialogRef
				if _, err := sc.Get("preference_candidate", &cand); err != nil || cand == nil {
					return err
				}
				if _, err := sc.Get("order", &o); err != nil {
					return err
				}
				if _, err := sc.Get("dialog", &ref); err != nil {
					return err
				}
				// The event that recorded the candidate is its provenance in the run.
				seq, err := eventOfStep(ctx, svc.Runs, sc.TenantID(), sc.RunID(), StepReadDialog)
				if err != nil {
					return err
				}
				rem, err := rememberPreference(ctx, svc.Memory, sc.TenantID(), o.Customer, ref.SessionID, sc.RunID(), seq, *cand)
				if err != nil {
					return err
				}
				return sc.Set("remembered", rem)
			}},
			{Name: StepApprove, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				req, err := refundRequest(sc)
				if err != nil {
					return err
				}
				a, err := sc.Approve(ctx, workflow.ApprovalSpec{Request: req, TTL: opts.ApprovalTTL})
				if errors.Is(err, workflow.ErrRejected) {
					sc.Complete()
					return sc.Set("outcome", OutcomeRejected)
				}
				if err != nil {
					return err
				}
				return sc.Set("approval_id", a.ApprovalID)
			}},
			{Name: StepRefund, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				workflow.At(ctx, PointBeforeRefund, sc.RunID())
				req, err := refundRequest(sc)
				if err != nil {
					return err
				}
				op, err := sc.Call(ctx, workflow.Call{
					Tool: ToolName, Key: BusinessKey(req.OrderID), Request: req, RequireApproval: StepApprove,
					Send: func(ctx context.Context, key string) (workflow.Reply, error) {
						ref, err := c.Refund(ctx, sc.RunID(), key, req)
						if err != nil {
							return workflow.Reply{}, err
						}
						b, _ := json.Marshal(ref)
						return workflow.Reply{ExternalRef: ref.RefundID, Result: b}, nil
					},
				})
				if err != nil {
					return err
				}
				return sc.Set("refund", map[string]string{"operation_id": op.OperationID, "idempotency_key": op.IdempotencyKey(), "refund_id": op.ExternalRef})
			}},
			{Name: StepVerify, Run: func(ctx context.Context, sc *workflow.StepContext) error {
				req, err := refundRequest(sc)
				if err != nil {
					return err
				}
				var rf map[string]string
				if _, err := sc.Get("refund", &rf); err != nil {
					return err
				}
				key := rf["idempotency_key"]
				if key == "" { // recorded before operations stored their key: it was the id
					key = rf["operation_id"]
				}
				res, err := c.Lookup(ctx, key)
				if err != nil {
					return err
				}
				switch res.Answer {
				case toolop.NotAuthoritative:
					// Retrying cannot help while the provider cannot tell: an operator decides.
					return workflow.Suspend(fmt.Sprintf("cannot verify refund %s: %s", rf["operation_id"], res.Detail))
				case toolop.NotApplied:
					sc.FailRun(fmt.Sprintf("refund %s recorded as succeeded but the provider does not know it", rf["operation_id"]))
					return nil
				}
				var got Refund
				if err := json.Unmarshal(res.Result, &got); err != nil {
					return err
				}
				if got.AmountCents != req.AmountCents || got.OrderID != req.OrderID {
					sc.FailRun(fmt.Sprintf("refund %s does not match the request: %+v", got.RefundID, got))
					return nil
				}
				return sc.Set("outcome", OutcomeRefunded)
			}},
		},
	}
}

// RegisterSchemas declares the state schema versions of the refund workflow
// and the migration v1 -> v2: v1 kept the order amount as a decimal "amount"
// in currency units; v2 keeps integer "amount_cents".
func RegisterSchemas(reg *run.Registry) error {
	v1 := []byte(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"},
		"order":{"type":"object","required":["amount"],"properties":{"amount":{"type":"number"}}}}}`)
	v2 := []byte(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"},
		"order":{"type":"object","required":["amount_cents"],"properties":{"amount_cents":{"type":"integer"}},"not":{"required":["amount"]}}}}`)
	if err := reg.RegisterSchema(WorkflowName, 1, v1); err != nil {
		return err
	}
	if err := reg.RegisterSchema(WorkflowName, 2, v2); err != nil {
		return err
	}
	reg.RegisterMigration(WorkflowName, 1, migrateV1)
	reg.SetCurrent(WorkflowName, SchemaVersion)
	return nil
}

func migrateV1(state json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(state, &top); err != nil {
		return nil, err
	}
	if raw, ok := top["order"]; ok {
		var o map[string]any
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, err
		}
		if amt, ok := o["amount"].(float64); ok {
			o["amount_cents"] = int64(amt*100 + 0.5)
			delete(o, "amount")
		}
		b, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		top["order"] = b
	}
	return json.Marshal(top)
}

// Policy approves refunds up to limitCents and rejects larger ones.
func Policy(limitCents int64) workflow.Approver {
	return func(ctx context.Context, a toolop.Approval) (toolop.Decision, bool) {
		var req RefundRequest
		if err := json.Unmarshal(a.Summary, &req); err != nil {
			return toolop.Decision{}, false
		}
		if req.AmountCents <= limitCents {
			return toolop.Decision{Approve: true, By: "policy", Reason: fmt.Sprintf("%d <= limit %d", req.AmountCents, limitCents)}, true
		}
		return toolop.Decision{Approve: false, By: "policy", Reason: fmt.Sprintf("%d > limit %d", req.AmountCents, limitCents)}, true
	}
}
