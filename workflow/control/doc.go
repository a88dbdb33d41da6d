// Package control is the workflow's control record: budgets and spend,
// approval guards, artifact references and tool contract versions, kept
// under a reserved key of the run state so they commit with every step.
package control
