package memory

import "testing"

func TestCategories(t *testing.T) {
	for c, want := range map[string]bool{"health": true, "Health": true, "health.allergy": true,
		"religion": true, "politics": true, "sexuality": true, "ethnicity": true, "biometric": true,
		"criminal": true, "like": false, "place": false, "mood": false, "": false} {
		if SensitiveCategory(c) != want {
			t.Errorf("SensitiveCategory(%q) != %v", c, want)
		}
	}
	for c, want := range map[string]bool{"mood": true, "emotion": true, "health": false, "like": false} {
		if TransientCategory(c) != want {
			t.Errorf("TransientCategory(%q) != %v", c, want)
		}
	}
}
