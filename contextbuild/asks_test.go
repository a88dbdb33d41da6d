package contextbuild

import (
	"testing"

	"github.com/mementohq/memento/search"
)

// A turn brings the next one only when one of its questions is about what
// the query asks; the "and you?" that closes a statement brings nothing.
func TestAsksAbout(t *testing.T) {
	q := map[string]bool{}
	for _, term := range search.Analyze("Where did Ana go hiking last spring?") {
		q[term] = true
	}
	for text, want := range map[string]bool{
		"Where did you go hiking last spring?":                   true,
		"Nice! Did you hike far? I stayed home.":                 true, // stems match
		"I went hiking last spring. How are your kids doing?":    false,
		"I went hiking last spring.":                             false,
		"How are you? Sorry, what did you say? Hiking is great.": false,
		"So good to hear!\nAny hikes planned?":                   true,
		"":                                                       false,
		"?":                                                      false,
	} {
		if got := asksAbout(text, q); got != want {
			t.Errorf("asksAbout(%q) = %v, want %v", text, got, want)
		}
	}
}
