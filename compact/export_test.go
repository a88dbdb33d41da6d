package compact

// ValidateDraft exposes the service's draft validation to the tests.
func ValidateDraft(d *Draft, rg Range) error { return d.validate(rg) }
