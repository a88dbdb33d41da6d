package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hbollon/go-edlib"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// explainArgErrors wraps the argument check of every leaf command so that a
// wrong number of arguments says what is missing or extra and shows the
// usage line: cobra's "accepts 1 arg(s), received 0" names neither. Groups
// are left to refuseUnknownSubcommands.
func explainArgErrors(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		explainArgErrors(c)
	}
	check := cmd.Args
	if check == nil || cmd.HasSubCommands() {
		return
	}
	cmd.Args = func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return argsError(c, args, err)
		}
		return nil
	}
}

// argsError rewrites err, the failed argument check of c, from the
// positional arguments c's Use line names.
func argsError(c *cobra.Command, args []string, err error) error {
	want := positionalArgs(c.Use)
	var msg string
	switch {
	case len(args) < len(want):
		msg = "missing " + strings.Join(want[len(args):], " ")
	case len(args) > len(want) && len(want) == 0:
		msg = "takes no arguments, got " + quoted(args)
		// A value without its flag ("memory ls ann") most often meant the
		// flag the usage line shows first.
		if flag := firstUnsetFlag(c); flag != "" && len(args) == 1 {
			msg += fmt.Sprintf("; did you mean --%s %s?", flag, args[0])
		}
	case len(args) > len(want):
		msg = fmt.Sprintf("too many arguments: takes %s, got %s", strings.Join(want, " "), quoted(args))
	default:
		// The count is right and a value is not (an OnlyValidArgs check).
		msg = err.Error()
	}
	return fmt.Errorf("%s: %s\nUsage: %s", subcommandPath(c), msg, c.UseLine())
}

// positionalArgs are the argument names of a Use line: the words after the
// command name up to the first flag or alternative ("fork RUN_ID (--from...").
func positionalArgs(use string) []string {
	words := strings.Fields(use)
	var out []string
	for _, w := range words[min(1, len(words)):] {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "(") || strings.HasPrefix(w, "[") {
			break
		}
		out = append(out, w)
	}
	return out
}

// firstUnsetFlag is the first "--name VALUE" of c's Use line that was not
// given, or "".
func firstUnsetFlag(c *cobra.Command) string {
	words := strings.Fields(c.Use)
	for i, w := range words {
		name, ok := strings.CutPrefix(w, "--")
		if !ok || i+1 == len(words) || strings.HasPrefix(words[i+1], "-") {
			continue
		}
		if f := c.Flags().Lookup(name); f != nil && !f.Changed {
			return name
		}
	}
	return ""
}

// quoted is args quoted and space separated.
func quoted(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}

// subcommandPath is c's path without the root's name, which main already
// prints before every error.
func subcommandPath(c *cobra.Command) string {
	if !c.HasParent() {
		return c.Name()
	}
	return strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
}

// closestCommands are the paths of c's subcommands nearest to typed (by
// edit distance to a name, alias or SuggestFor word, or typed being a
// prefix), at most two edits away; failing that, of deeper commands named
// typed ("workflows put" is "workflows schemas put"); nil if none.
func closestCommands(c *cobra.Command, typed string) []string {
	near := nearSubcommands(c, typed)
	if len(near) == 0 {
		near = namedBelow(c, strings.ToLower(typed))
	}
	var out []string
	for _, sub := range near {
		out = append(out, sub.CommandPath())
	}
	return out
}

// namedBelow are the available commands under c's subcommands named typed.
func namedBelow(c *cobra.Command, typed string) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() {
			continue
		}
		for _, d := range sub.Commands() {
			if d.IsAvailableCommand() && (d.Name() == typed || d.HasAlias(typed)) {
				out = append(out, d)
			}
		}
		out = append(out, namedBelow(sub, typed)...)
	}
	return out
}

// nearSubcommands are c's subcommands least far from typed, if at most two
// edits; a word typed is the start of counts as one edit away.
func nearSubcommands(c *cobra.Command, typed string) []*cobra.Command {
	const maxDistance = 2
	best, out := maxDistance+1, []*cobra.Command(nil)
	typed = strings.ToLower(typed)
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() {
			continue
		}
		d := maxDistance + 1
		for _, w := range append(append([]string{sub.Name()}, sub.Aliases...), sub.SuggestFor...) {
			w = strings.ToLower(w)
			if len(typed) >= 2 && strings.HasPrefix(w, typed) {
				d = min(d, 1)
			}
			d = min(d, edlib.LevenshteinDistance(typed, w))
		}
		switch {
		case d < best:
			best, out = d, []*cobra.Command{sub}
		case d == best && d <= maxDistance:
			out = append(out, sub)
		}
	}
	return out
}

// suggestFlag adds the nearest flag of c to an unknown-flag error
// ("unknown flag: --postgress; did you mean --postgres?"); cobra suggests
// commands, never flags.
func suggestFlag(c *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	best, bestD := "", 3 // at most two edits away
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if d := edlib.LevenshteinDistance(name, f.Name); d < bestD || (d == bestD && f.Name < best) {
			best, bestD = f.Name, d
		}
	})
	if best == "" {
		return fmt.Errorf("%w\nUsage: %s", err, c.UseLine())
	}
	return fmt.Errorf("%w; did you mean --%s?", err, best)
}
