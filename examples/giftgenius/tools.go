package giftgenius

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mementohq/memento/agent"
)

// Names of the app's own tools.
const (
	ToolSearch   = "catalog_search"
	ToolFilter   = "catalog_filter"
	ToolFinalize = "gift_finalize"
)

type searchIn struct {
	Interests  []string `json:"interests" jsonschema:"the recipient's interests, for example [\"hiking\", \"coffee\"]"`
	ExcludeIDs []string `json:"exclude_ids,omitempty" jsonschema:"product ids to leave out (earlier choices are left out anyway)"`
}

type searchOut struct {
	Candidates []Brief `json:"candidates"`
	// Excluded are the earlier choices left out, so the model can say so.
	Excluded []Brief  `json:"excluded,omitempty"`
	Unknown  []string `json:"unknown_interests,omitempty"`
}

type filterIn struct {
	IDs               []string `json:"ids" jsonschema:"the candidate product ids from catalog_search"`
	BudgetEUR         int      `json:"budget_eur" jsonschema:"the most the gift may cost, in euros"`
	Region            string   `json:"region" jsonschema:"where it ships: an ISO country code (DE, FR, GB...) or a country name"`
	DeliverWithinDays int      `json:"deliver_within_days,omitempty" jsonschema:"the most days delivery may take; 0 or absent: no deadline"`
}

type filterOut struct {
	Kept    []Brief   `json:"kept"`
	Dropped []Dropped `json:"dropped"`
}

type finalizeIn struct {
	ProductID string `json:"product_id" jsonschema:"the id of the product the user chose, one of the filtered options"`
}

type finalizeOut struct {
	ProductID    string `json:"product_id"`
	Name         string `json:"name"`
	PriceEUR     int    `json:"price_eur"`
	DeliveryDays int    `json:"delivery_days"`
	Recipient    string `json:"recipient,omitempty"`
	Region       string `json:"region,omitempty"`
}

// NewAppTools returns the app's tools for one session. memento are
// Memento's tools bound to the user: each app tool writes what it found into
// the session state (ids only) before it answers, so the checkpoint the loop
// takes after it holds the result whatever the model does next.
func NewAppTools(cat *Catalog, memento agent.Tools, sessionID string) (*agent.Local, error) {
	s := session{tools: memento, id: sessionID}
	search, err := agent.NewFunc(ToolSearch,
		"Find candidate gifts in the catalogue for the recipient's interests. Returns ids with name and price, best matches first, and stores the candidate ids in the session. Starts a new round after a final choice, leaving earlier choices out.",
		func(ctx context.Context, in searchIn) (searchOut, error) {
			var tags, unknown []string
			for _, w := range in.Interests {
				if t := NormalizeInterest(w); t != "" {
					if !slices.Contains(tags, t) {
						tags = append(tags, t)
					}
				} else {
					unknown = append(unknown, w)
				}
			}
			if len(tags) == 0 {
				return searchOut{}, &agent.ToolError{Type: "no-known-interest",
					Detail: fmt.Sprintf("none of %q is an interest the catalogue knows; it knows: %s", in.Interests, knownInterests())}
			}
			st, err := s.get(ctx)
			if err != nil {
				return searchOut{}, err
			}
			// A final choice ends a round: a new search is the next one,
			// and what was chosen before is not offered again.
			prev := st.PreviousChoiceIDs
			if st.ChoiceID != "" && !slices.Contains(prev, st.ChoiceID) {
				prev = append(prev, st.ChoiceID)
			}
			exclude := append(slices.Clone(in.ExcludeIDs), prev...)
			out := searchOut{Candidates: cat.Search(tags, exclude), Unknown: unknown}
			for _, id := range prev {
				if p, ok := cat.Product(id); ok {
					out.Excluded = append(out.Excluded, p.brief())
				}
			}
			if len(out.Candidates) == 0 {
				return searchOut{}, &agent.ToolError{Type: "no-candidates", Detail: fmt.Sprintf("no product for %s that was not chosen before", strings.Join(tags, ", "))}
			}
			ids := make([]string, len(out.Candidates))
			for i, c := range out.Candidates {
				ids[i] = c.ID
			}
			patch := map[string]any{"step": StepCandidates, "candidate_ids": ids, "kept_ids": nil, "choice_id": nil}
			if len(prev) > 0 {
				patch["previous_choice_ids"] = prev
			}
			if err := s.patch(ctx, patch); err != nil {
				return searchOut{}, err
			}
			return out, nil
		})
	if err != nil {
		return nil, err
	}
	filter, err := agent.NewFunc(ToolFilter,
		"Keep the candidates that fit the budget, ship to the region and arrive in time; says why each other one was dropped, and stores the kept ids in the session.",
		func(ctx context.Context, in filterIn) (filterOut, error) {
			region := NormalizeRegion(in.Region)
			switch {
			case len(in.IDs) == 0:
				return filterOut{}, &agent.ToolError{Type: "invalid-arguments", Detail: "ids must name the candidates to filter (from catalog_search)"}
			case in.BudgetEUR <= 0:
				return filterOut{}, &agent.ToolError{Type: "invalid-arguments", Detail: "budget_eur must be a positive number of euros"}
			case region == "":
				return filterOut{}, &agent.ToolError{Type: "invalid-arguments", Detail: fmt.Sprintf("region %q is not a place the catalogue ships to; it ships to %s", in.Region, knownRegions())}
			case in.DeliverWithinDays < 0:
				return filterOut{}, &agent.ToolError{Type: "invalid-arguments", Detail: "deliver_within_days must not be negative"}
			}
			kept, dropped := cat.Filter(in.IDs, in.BudgetEUR, region, in.DeliverWithinDays)
			ids := make([]string, len(kept))
			for i, k := range kept {
				ids[i] = k.ID
			}
			if err := s.patch(ctx, map[string]any{"step": StepFiltered, "kept_ids": ids}); err != nil {
				return filterOut{}, err
			}
			if kept == nil {
				kept = []Brief{}
			}
			return filterOut{Kept: kept, Dropped: dropped}, nil
		})
	if err != nil {
		return nil, err
	}
	finalize, err := agent.NewFunc(ToolFinalize,
		"Record the user's final choice: one of the filtered options (kept ids). Stores the choice in the session.",
		func(ctx context.Context, in finalizeIn) (finalizeOut, error) {
			p, ok := cat.Product(in.ProductID)
			if !ok {
				return finalizeOut{}, &agent.ToolError{Type: "unknown-product", Detail: fmt.Sprintf("there is no product %q", in.ProductID)}
			}
			st, err := s.get(ctx)
			if err != nil {
				return finalizeOut{}, err
			}
			// Only what passed the filter can be chosen: a model cannot
			// finalize a gift over the budget or one that does not ship.
			if !slices.Contains(st.KeptIDs, p.ID) {
				return finalizeOut{}, &agent.ToolError{Type: "not-an-option",
					Detail: fmt.Sprintf("%s is not among the filtered options %v: search and filter first", p.ID, st.KeptIDs)}
			}
			if err := s.patch(ctx, map[string]any{"step": StepFinal, "choice_id": p.ID}); err != nil {
				return finalizeOut{}, err
			}
			out := finalizeOut{ProductID: p.ID, Name: p.Name, PriceEUR: p.PriceEUR, DeliveryDays: p.DeliveryDays}
			if st.Profile != nil {
				out.Recipient, out.Region = st.Profile.Recipient, st.Profile.Region
			}
			return out, nil
		})
	if err != nil {
		return nil, err
	}
	return agent.NewLocal(search, filter, finalize)
}

func knownInterests() string {
	tags := make([]string, 0, len(Interests))
	for t := range Interests {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	return strings.Join(tags, ", ")
}

func knownRegions() string {
	codes := make([]string, 0, len(Regions))
	for c := range Regions {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	return strings.Join(codes, ", ")
}
