package memento_test

// The body of Example is the code of docs/clients/go.md, and its Output the
// output the guide shows; TestGoGuide keeps them the same.

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/mementohq/memento"
	"github.com/mementohq/memento/contextbuild"
	"github.com/mementohq/memento/memory"
	"github.com/mementohq/memento/retrieval"
	"github.com/mementohq/memento/run"
	"github.com/mementohq/memento/session"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "memento-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The embedded backend: SQLite files in dir, nothing else to run.
	eng, err := memento.Open(ctx, memento.Config{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	const tenant = "acme" // every call names its tenant; nothing crosses tenants

	// Session memory: the state of one conversation, bound to its user, with a TTL.
	s, _, err := eng.Sessions.Put(ctx, tenant, "chat-1", session.PutRequest{
		UserID: "ann", State: json.RawMessage(`{"step":"ask_budget"}`), TTL: 30 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	// A JSON merge patch, applied only if the session is still at s.Revision.
	s, err = eng.Sessions.Patch(ctx, tenant, "chat-1", "ann", s.Revision, json.RawMessage(`{"budget":50}`))
	if err != nil {
		log.Fatal(err)
	}
	appended, err := eng.Sessions.Append(ctx, tenant, "chat-1", "ann", []session.MessageInput{
		{Role: "user", Content: "I live in Oslo, and my budget is 50 EUR."},
		{Role: "assistant", Content: "Noted: Oslo, 50 EUR."},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("session revision %d, state %s, %d messages\n", s.Revision, s.State, appended.MessageCount)

	// A durable run: create, take the lease, commit a step, label the revision.
	r, _, err := eng.Runs.Create(ctx, tenant, run.CreateRequest{RunID: "gift-ann", WorkflowName: "giftgenius",
		WorkflowVersion: "1", State: json.RawMessage(`{}`), NextStep: "collect_profile"}, "")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := eng.Runs.AcquireLease(ctx, tenant, r.RunID, "worker-1", 0, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	// One event appended and the state replaced in one transaction, only if the
	// run is still at this revision and worker-1 still holds the lease.
	r, ev, err := eng.Runs.Commit(ctx, tenant, r.RunID, run.CommitRequest{
		ExpectedRevision: r.StateRevision, Lease: lease,
		Event:    run.EventInput{EventType: "step.completed", StepID: "collect_profile"},
		State:    json.RawMessage(`{"city":"Oslo","budget":50}`),
		NextStep: "candidates"})
	if err != nil {
		log.Fatal(err)
	}
	cp, err := eng.Runs.Checkpoint(ctx, tenant, r.RunID, "profile-collected", r.StateRevision)
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Runs.ReleaseLease(ctx, tenant, r.RunID, lease); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("run %s: event %d, checkpoint %s at revision %d, next %s\n", r.RunID, ev.Seq, cp.Label, cp.Revision, r.NextStep)

	// Long-term memory: a narrow claim about the user, with where it came from.
	added, err := eng.Memory.Add(ctx, tenant, memory.AddInput{
		SubjectID: "ann", Namespace: "profile", Key: "home.city", Value: json.RawMessage(`"Oslo"`),
		Text: "Ann lives in Oslo",
		Provenance: memory.Provenance{SourceType: memory.SourceMessage, SourceID: "session:chat-1",
			MessageIDs: []string{"1"}, ValidatedBy: memory.ValidatedUserStated}})
	if err != nil {
		log.Fatal(err)
	}
	found, err := eng.Memory.Search(ctx, tenant, memory.SearchQuery{SubjectID: "ann", Query: "where does Ann live", K: 3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("memory %s; search found %d: %s = %s (%s)\n", added.Outcome, len(found.Items),
		found.Items[0].Key, found.Items[0].Value, found.Items[0].Provenance.ValidatedBy)

	// Retrieval: a document with an ACL; only principals it names get its chunks.
	_, _, err = eng.Retrieval.Put(ctx, tenant, retrieval.PutRequest{DocumentID: "shipping",
		SourceURI: "kb://policies/shipping.md", SourceVersion: "v3",
		Content: "Orders over 40 EUR ship free to Norway within three days.", ACL: []string{"user:ann"}})
	if err != nil {
		log.Fatal(err)
	}
	snap, err := eng.Retrieval.Retrieve(ctx, tenant, retrieval.RetrieveRequest{Query: "free shipping to Norway", Principal: "user:ann", K: 3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("retrieved %s@%s: %s\n", snap.Hits[0].ChunkID, snap.Hits[0].SourceVersion, snap.Hits[0].Text)

	// Working memory: what the model sees, under a budget, with every part accounted for.
	built, err := eng.Context.Build(ctx, tenant, contextbuild.Request{Model: "gpt-4o", BudgetTokens: 1000, ReserveTokens: 200,
		System: "You are GiftGenius.", Query: "A gift for my friend?",
		SessionID: "chat-1", UserID: "ann", SubjectID: "ann", Principal: "user:ann"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("context: %d messages, %d of %d tokens (%s)\n", len(built.Messages), built.Accounting.TotalTokens,
		built.Accounting.BudgetTokens-built.Accounting.ReserveTokens, built.Accounting.Tokenizer)
	for _, p := range built.Accounting.Parts {
		// Sources name what each part holds; the claim's id is random, so it prints as ID.
		sources := strings.ReplaceAll(fmt.Sprint(p.SourceIDs), added.Claim.MemoryID, "ID")
		fmt.Printf("  %-14s %3d tokens from %s\n", p.Kind, p.Tokens, sources)
	}
	// Output:
	// session revision 2, state {"budget":50,"step":"ask_budget"}, 2 messages
	// run gift-ann: event 2, checkpoint profile-collected at revision 2, next candidates
	// memory added; search found 1: home.city = "Oslo" (user_stated)
	// retrieved shipping:p1:c0@v3: Orders over 40 EUR ship free to Norway within three days.
	// context: 7 messages, 116 of 800 tokens (o200k_base)
	//   system          10 tokens from []
	//   session_state   17 tokens from [session:chat-1@2]
	//   profile         19 tokens from [memory:ID]
	//   documents       27 tokens from [chunk:shipping:p1:c0]
	//   recent_history  30 tokens from [msg:1 msg:2]
	//   query           10 tokens from []
}
