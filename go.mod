module github.com/mementohq/memento

go 1.26.8

require (
	github.com/google/uuid v1.6.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
)

require golang.org/x/text v0.42.0 // indirect
