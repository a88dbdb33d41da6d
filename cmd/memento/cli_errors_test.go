package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// walk calls fn on cmd and every command under it.
func walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, c := range cmd.Commands() {
		walk(c, fn)
	}
}

// envClaim is what the help of a command says when each of its flags has
// an environment variable.
const envClaim = "Every flag has an environment variable"

// TestEveryFlagHasItsEnvironmentVariable: every flag of a command whose help
// claims each has an environment variable names one in its usage and is read
// through it (flagOrEnv notes the variable on the flag), so a new flag
// without one fails here. The run goes down every path that reads a flag
// (a remote embedder and extractor) and stops at opening the data directory.
func TestEveryFlagHasItsEnvironmentVariable(t *testing.T) {
	var claimants []string
	walk(newRootCmd(), func(c *cobra.Command) {
		if strings.Contains(strings.Join(strings.Fields(c.Long), " "), envClaim) {
			claimants = append(claimants, subcommandPath(c))
		}
	})
	if !strings.Contains(" "+strings.Join(claimants, " ")+" ", " serve ") {
		t.Fatalf("commands claiming an environment variable per flag: %v, want serve among them", claimants)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envEmbedder, "openai")
	t.Setenv(envExtractor, "llm")
	t.Setenv(envModelURL, "http://127.0.0.1:1")
	usageEnv := regexp.MustCompile(`\(env (MEMENTO_[A-Z_]+)[,;)]`)
	for _, path := range claimants {
		t.Run(path, func(t *testing.T) {
			root := newRootCmd()
			root.SetOut(new(strings.Builder))
			root.SetErr(new(strings.Builder))
			// --data under a file makes the engine fail to open, after
			// every flag is read; --listen keeps serve off the default port
			// should it get further.
			args := append(strings.Fields(path), "--data", filepath.Join(notDir, "data"))
			cmd, _, err := root.Find(args)
			if err != nil {
				t.Fatal(err)
			}
			if cmd.Flags().Lookup("listen") != nil {
				args = append(args, "--listen", "127.0.0.1:18711")
			}
			root.SetArgs(args)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := root.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "not a directory") {
				t.Fatalf("memento %s with --data under a file: %v, want it to fail opening the data directory", path, err)
			}
			cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if f.Name == "help" {
					return
				}
				m := usageEnv.FindStringSubmatch(f.Usage)
				if m == nil {
					t.Errorf("--%s: the usage names no environment variable (\"(env MEMENTO_...)\"): %q", f.Name, f.Usage)
					return
				}
				if got := f.Annotations[envAnnotation]; len(got) != 1 || got[0] != m[1] {
					t.Errorf("--%s: the usage names %s but the command read %v (resolve it with flagOrEnv)", f.Name, m[1], got)
				}
			})
		})
	}
}

// TestArgumentCountErrors: a wrong number of arguments names what is
// missing or extra and shows the usage line, for every command, instead of
// cobra's "accepts 1 arg(s), received 0".
func TestArgumentCountErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "events"}, "runs events: missing RUN_ID\nUsage: memento runs events RUN_ID [flags]"},
		{[]string{"docs", "member", "ops"}, "docs member: missing PRINCIPAL\nUsage: memento docs member GROUP PRINCIPAL [--rm] [flags]"},
		{[]string{"workflows", "schemas", "put", "refund"}, "workflows schemas put: missing VERSION FILE|-\nUsage: memento workflows schemas put NAME VERSION FILE|- [flags]"},
		{[]string{"runs", "show", "r1", "r2"}, `runs show: too many arguments: takes RUN_ID, got "r1" "r2"` + "\nUsage: memento runs show RUN_ID [flags]"},
		{[]string{"memory", "ls", "ann"}, `memory ls: takes no arguments, got "ann"; did you mean --subject ann?` + "\nUsage: memento memory ls --subject S [flags]"},
		{[]string{"serve", "now"}, `serve: takes no arguments, got "now"` + "\nUsage: memento serve [flags]"},
		{[]string{"models", "install", "word2vec"}, `models install: invalid argument "word2vec" for "memento models install"` + "\nUsage: memento models install glove [flags]"},
	} {
		_, _, err := execute(t, ctx, tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("memento %s:\n%v\nwant\n%s", strings.Join(tc.args, " "), err, tc.want)
		}
	}

	// Every leaf, with one argument too many and with none: the check is
	// called directly, so a command that accepts the arguments runs nothing.
	walk(newRootCmd(), func(c *cobra.Command) {
		if c.HasSubCommands() || !c.Runnable() || c.Hidden || c.Name() == "help" { // help takes any command path
			return
		}
		if c.Args == nil {
			t.Errorf("%s checks no arguments: give it an Args", c.CommandPath())
			return
		}
		usage := "\nUsage: " + c.UseLine()
		extra := append(positionalArgs(c.Use), "surplus")
		err := c.Args(c, extra)
		if err == nil || !strings.HasPrefix(err.Error(), subcommandPath(c)+": ") || !strings.Contains(err.Error(), `"surplus"`) ||
			!strings.HasSuffix(err.Error(), usage) || strings.Contains(err.Error(), "arg(s)") {
			t.Errorf("%s with %q: %v, want the extra argument named and the usage line", c.CommandPath(), extra, err)
		}
		if err := c.Args(c, nil); err != nil && (!strings.HasPrefix(err.Error(), subcommandPath(c)+": missing ") || !strings.HasSuffix(err.Error(), usage)) {
			t.Errorf("%s without arguments: %v, want what is missing and the usage line", c.CommandPath(), err)
		}
	})
}

// TestUnknownSubcommandSuggests: a mistyped command at any level of the
// tree fails and names the nearest command.
// A mistyped flag names the nearest one; one with nothing near shows the usage.
func TestUnknownFlagSuggests(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--postgress", "x"}, "unknown flag: --postgress; did you mean --postgres?"},
		{[]string{"runs", "ls", "--limt", "3"}, "unknown flag: --limt; did you mean --limit?"},
		{[]string{"serve", "--addr", "x"}, "unknown flag: --addr\nUsage: memento serve"},
	} {
		_, _, err := execute(t, ctx, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("memento %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestUnknownSubcommandSuggests(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "gett"}, "did you mean 'memento runs show'?"},
		{[]string{"runs", "get"}, "did you mean 'memento runs show'?"},
		{[]string{"memory", "serch"}, "did you mean 'memento memory search'?"},
		{[]string{"docs", "invalidation"}, "did you mean 'memento docs invalidations'?"},
		{[]string{"workflows", "schemas", "gett"}, "did you mean 'memento workflows schemas get'?"},
		{[]string{"workflows", "put"}, "did you mean 'memento workflows schemas put'?"},
		{[]string{"bench", "comit"}, "did you mean 'memento bench commit'?"},
		{[]string{"serv"}, "did you mean 'memento serve'?"},
		{[]string{"completion", "bahs"}, "did you mean 'memento completion bash'?"},
	} {
		_, _, err := execute(t, ctx, tc.args...)
		if err == nil || !strings.Contains(err.Error(), "unknown command") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("memento %s: %v, want %s", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// Every subcommand of every group, with its last letter doubled.
	walk(newRootCmd(), func(group *cobra.Command) {
		if !group.HasSubCommands() {
			return
		}
		for _, c := range group.Commands() {
			if !c.IsAvailableCommand() {
				continue
			}
			typo := c.Name() + c.Name()[len(c.Name())-1:]
			err := group.Args(group, []string{typo})
			if err == nil || !strings.Contains(err.Error(), "'"+c.CommandPath()+"'") {
				t.Errorf("%s %s: %v, want %s suggested", group.CommandPath(), typo, err, c.CommandPath())
			}
		}
	})
}

func TestVersionFlag(t *testing.T) {
	ctx := context.Background()
	out, _, err := execute(t, ctx, "--version")
	if err != nil || out != versionLine()+"\n" || !strings.HasPrefix(out, "memento "+buildVersion()+" (go") {
		t.Fatalf("--version: %v %q", err, out)
	}
	if cmdOut, _, err := execute(t, ctx, "version"); err != nil || cmdOut != out {
		t.Fatalf("version printed %q, --version %q", cmdOut, out)
	}

	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{nil, "devel"},
		{&debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "da74819c0ffee0123456789abcdef0123456789a"}, {Key: "vcs.modified", Value: "false"}}}, "da74819c0ffe"},
		{&debug.BuildInfo{Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "da74819c0ffee0123456789abcdef0123456789a"}, {Key: "vcs.modified", Value: "true"}}}, "da74819c0ffe+modified"},
	} {
		if got := versionOf(tc.bi, tc.bi != nil); got != tc.want {
			t.Errorf("versionOf(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 hits", 1: "1 hit", 2: "2 hits"} {
		if got := plural(n, "hit", "hits"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
