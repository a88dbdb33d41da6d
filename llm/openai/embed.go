package openai

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/mementohq/memento/llm"
)

// DefaultBatchSize is how many inputs go in one embeddings request. It is
// low because TEI refuses more than 32 by default; OpenAI takes 2048.
const DefaultBatchSize = 32

// EmbedderConfig chooses the embedding model.
type EmbedderConfig struct {
	// Model is the provider's model name, e.g. "text-embedding-3-small".
	Model string
	// Dim is the expected dimension. 0 learns it from the first answer
	// (Dim() is 0 until then); a later answer of another size is an error.
	Dim int
	// SendDimensions asks the server for Dim dimensions (OpenAI's
	// "dimensions" parameter of the text-embedding-3 models).
	SendDimensions bool
	// BatchSize is the number of inputs per request (default DefaultBatchSize).
	BatchSize int
	// Provider names the server in Model(), "openai" by default: the same
	// model name on another server may be other weights ("ollama",
	// "vllm", "tei" ...).
	Provider string
}

// Embedder embeds through POST {base}/v1/embeddings.
type Embedder struct {
	c     *Client
	cfg   EmbedderConfig
	model string
	dim   atomic.Int64
}

var _ llm.Embedder = (*Embedder)(nil)

// NewEmbedder returns an embedder of the model.
func (c *Client) NewEmbedder(cfg EmbedderConfig) (*Embedder, error) {
	if cfg.Model == "" {
		return nil, fmt.Errorf("openai: embedder needs a model name")
	}
	if cfg.Dim < 0 || (cfg.SendDimensions && cfg.Dim == 0) {
		return nil, fmt.Errorf("openai: embedder dimension %d invalid (SendDimensions needs Dim > 0)", cfg.Dim)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Provider == "" {
		cfg.Provider = "openai"
	}
	id := cfg.Provider + ":" + cfg.Model
	if cfg.SendDimensions {
		id += fmt.Sprintf("@%d", cfg.Dim)
	}
	e := &Embedder{c: c, cfg: cfg, model: id}
	e.dim.Store(int64(cfg.Dim))
	return e, nil
}

// Model is "<provider>:<model>", with "@<dim>" when dimensions are requested
// (the vectors of text-embedding-3-small at 512 are not its 1536 ones cut).
func (e *Embedder) Model() string { return e.model }

// Dim is the vector length (0 before the first answer when not configured).
func (e *Embedder) Dim() int { return int(e.dim.Load()) }

type embedRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

type embedResponse struct {
	Data []struct {
		Index     *int      `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

// Embed returns one unit vector per text, in order. Texts are sent in
// batches, one request after the other. An empty text is not sent (OpenAI
// refuses it) and gets the all-zero vector.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var batch []string
	var where []int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		vs, err := e.embedBatch(ctx, batch)
		if err != nil {
			return err
		}
		for i, v := range vs {
			out[where[i]] = v
		}
		batch, where = batch[:0], where[:0]
		return nil
	}
	for i, t := range texts {
		if t == "" {
			continue
		}
		batch = append(batch, t)
		where = append(where, i)
		if len(batch) == e.cfg.BatchSize {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	dim := e.Dim()
	for i := range out {
		if out[i] == nil {
			if dim == 0 {
				return nil, fmt.Errorf("openai: embed: dimension unknown for an empty text; configure EmbedderConfig.Dim")
			}
			out[i] = make([]float32, dim)
		}
	}
	return out, nil
}

func (e *Embedder) embedBatch(ctx context.Context, batch []string) ([][]float32, error) {
	req := embedRequest{Model: e.cfg.Model, Input: batch, EncodingFormat: "float"}
	if e.cfg.SendDimensions {
		req.Dimensions = e.cfg.Dim
	}
	var resp embedResponse
	if err := e.c.post(ctx, "/v1/embeddings", req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Data) != len(batch) {
		return nil, malformed("/v1/embeddings: %d vectors for %d inputs", len(resp.Data), len(batch))
	}
	out := make([][]float32, len(batch))
	dim := e.Dim()
	for k, d := range resp.Data {
		idx := k // a server that omits index answers in order
		if d.Index != nil {
			idx = *d.Index
		}
		if idx < 0 || idx >= len(batch) || out[idx] != nil {
			return nil, malformed("/v1/embeddings: index %d out of range or repeated", idx)
		}
		if len(d.Embedding) == 0 {
			return nil, malformed("/v1/embeddings: empty vector at index %d", idx)
		}
		if dim == 0 {
			// First answer fixes the dimension for the life of the embedder.
			e.dim.CompareAndSwap(0, int64(len(d.Embedding)))
			dim = e.Dim()
		}
		if len(d.Embedding) != dim {
			return nil, malformed("/v1/embeddings: vector %d has %d dimensions, want %d", idx, len(d.Embedding), dim)
		}
		v := make([]float32, dim)
		for j, x := range d.Embedding {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, malformed("/v1/embeddings: non-finite value in vector %d", idx)
			}
			v[j] = float32(x)
		}
		llm.Normalize(v)
		out[idx] = v
	}
	return out, nil
}
