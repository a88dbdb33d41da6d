package giftgenius

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Product is one gift of the catalogue. Only its id ever goes into session
// state or a checkpoint; the catalogue is the source of the rest.
type Product struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	PriceEUR     int      `json:"price_eur"`
	Tags         []string `json:"tags"`
	ShipsTo      []string `json:"ships_to"`
	DeliveryDays int      `json:"delivery_days"`
}

//go:embed catalog.json
var catalogJSON []byte

// Catalog is the small embedded catalogue the example sells from.
type Catalog struct {
	products []Product
	byID     map[string]Product
}

// LoadCatalog parses the embedded catalogue.
func LoadCatalog() (*Catalog, error) {
	var ps []Product
	if err := json.Unmarshal(catalogJSON, &ps); err != nil {
		return nil, fmt.Errorf("giftgenius: parse the catalogue: %w", err)
	}
	c := &Catalog{products: ps, byID: make(map[string]Product, len(ps))}
	for _, p := range ps {
		if _, dup := c.byID[p.ID]; dup {
			return nil, fmt.Errorf("giftgenius: catalogue: product %s twice", p.ID)
		}
		c.byID[p.ID] = p
	}
	return c, nil
}

// Product looks up one product.
func (c *Catalog) Product(id string) (Product, bool) {
	p, ok := c.byID[id]
	return p, ok
}

// Products lists the catalogue in its order.
func (c *Catalog) Products() []Product { return slices.Clone(c.products) }

// Interests are the tags the catalogue knows, each with the words a person
// may use for it.
var Interests = map[string][]string{
	"hiking":      {"hiking", "hike", "hikes", "hiker", "trekking", "mountains", "outdoors"},
	"coffee":      {"coffee", "espresso", "barista"},
	"tea":         {"tea"},
	"cooking":     {"cooking", "cook", "cooks", "baking", "kitchen"},
	"reading":     {"reading", "books", "novels", "reads"},
	"music":       {"music", "vinyl", "records"},
	"gardening":   {"gardening", "garden", "plants"},
	"yoga":        {"yoga", "meditation"},
	"photography": {"photography", "photos", "cameras"},
	"travel":      {"travel", "travelling", "traveling", "trips"},
	"games":       {"games", "gaming", "board games"},
	"art":         {"art", "drawing", "painting", "watercolour", "watercolor"},
	"cycling":     {"cycling", "bike", "bikes", "biking"},
	"running":     {"running", "runner", "jogging"},
}

// NormalizeInterest maps a word to the tag it names ("" when the catalogue
// has no such interest).
func NormalizeInterest(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	for tag, words := range Interests {
		if s == tag || slices.Contains(words, s) {
			return tag
		}
	}
	return ""
}

// Regions the catalogue ships to, by ISO code, with the names people use.
var Regions = map[string][]string{
	"DE": {"germany", "deutschland"},
	"AT": {"austria"},
	"CH": {"switzerland"},
	"NL": {"netherlands", "the netherlands", "holland"},
	"BE": {"belgium"},
	"FR": {"france"},
	"IT": {"italy"},
	"ES": {"spain"},
	"GB": {"uk", "united kingdom", "england", "britain", "great britain", "scotland", "wales"},
	"US": {"usa", "united states", "america"},
}

// NormalizeRegion maps a code or a country name to its code ("" when the
// catalogue ships to no such place).
func NormalizeRegion(s string) string {
	s = strings.TrimSpace(s)
	if _, ok := Regions[strings.ToUpper(s)]; ok && len(s) == 2 {
		return strings.ToUpper(s)
	}
	l := strings.ToLower(s)
	for code, names := range Regions {
		if slices.Contains(names, l) {
			return code
		}
	}
	return ""
}

// Brief is what a tool shows of a product: enough to present it.
type Brief struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	PriceEUR int      `json:"price_eur"`
	Matches  []string `json:"matches,omitempty"`
}

func (p Product) brief() Brief { return Brief{ID: p.ID, Name: p.Name, PriceEUR: p.PriceEUR} }

// MaxCandidates bounds one search: the catalogue is small, a prompt is not.
const MaxCandidates = 12

// Search returns the products sharing a tag with interests, those sharing
// more first and, among equals, the dearer first (the filter drops what the
// budget does not allow), leaving out exclude.
func (c *Catalog) Search(interests, exclude []string) []Brief {
	var out []Brief
	for _, p := range c.products {
		if slices.Contains(exclude, p.ID) {
			continue
		}
		var m []string
		for _, t := range p.Tags {
			if slices.Contains(interests, t) {
				m = append(m, t)
			}
		}
		if len(m) == 0 {
			continue
		}
		b := p.brief()
		b.Matches = m
		out = append(out, b)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if len(out[i].Matches) != len(out[j].Matches) {
			return len(out[i].Matches) > len(out[j].Matches)
		}
		return out[i].PriceEUR > out[j].PriceEUR
	})
	if len(out) > MaxCandidates {
		out = out[:MaxCandidates]
	}
	return out
}

// Dropped is a product the filter left out, and why.
type Dropped struct {
	ID      string   `json:"id"`
	Reasons []string `json:"reasons"`
}

// Filter keeps, in their order, the products within budget that ship to
// region within days (0: any delivery time).
func (c *Catalog) Filter(ids []string, budget int, region string, days int) (kept []Brief, dropped []Dropped) {
	for _, id := range ids {
		p, ok := c.byID[id]
		if !ok {
			dropped = append(dropped, Dropped{ID: id, Reasons: []string{"not in the catalogue"}})
			continue
		}
		var why []string
		if p.PriceEUR > budget {
			why = append(why, fmt.Sprintf("costs %d EUR, over the budget of %d", p.PriceEUR, budget))
		}
		if !slices.Contains(p.ShipsTo, region) {
			why = append(why, "does not ship to "+region)
		}
		if days > 0 && p.DeliveryDays > days {
			why = append(why, fmt.Sprintf("takes %d days to deliver, more than %d", p.DeliveryDays, days))
		}
		if len(why) > 0 {
			dropped = append(dropped, Dropped{ID: id, Reasons: why})
			continue
		}
		kept = append(kept, p.brief())
	}
	return kept, dropped
}
