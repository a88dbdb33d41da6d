package glove

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// The file format (all integers little endian):
//
//	offset  size    field
//	0       8       magic "MEMGLOVE"
//	8       4       format version, uint32 = 1
//	12      4       dim, uint32 (1..4096)
//	16      4       count of words, uint32
//	20      1       row encoding: 1 = float16 (IEEE binary16), 2 = float32
//	21      1       reserved, 0
//	22      2       name length n, uint16; then n bytes of UTF-8 name
//	                (the family, e.g. "glove-6b-100d")
//	...             count words in rank order, most frequent first: each a
//	                uvarint byte length then its UTF-8 bytes (unique)
//	...             count rows of dim values in the row encoding, row i is
//	                the vector of word i
//	end-32  32      SHA-256 of every byte before it
//
// The rank order is the frequency information: SIF weights come from a Zipf
// estimate over it. The digest guards against a truncated or corrupt file and
// names the data in Model().
const (
	magic         = "MEMGLOVE"
	formatVersion = 1
	maxDim        = 4096
	maxWordBytes  = 1024
)

// Encoding is how rows are stored.
type Encoding uint8

// The row encodings.
const (
	Float16 Encoding = 1
	Float32 Encoding = 2
)

func (e Encoding) size() int {
	if e == Float16 {
		return 2
	}
	return 4
}

func (e Encoding) String() string {
	switch e {
	case Float16:
		return "f16"
	case Float32:
		return "f32"
	}
	return fmt.Sprintf("enc%d", uint8(e))
}

// ErrFormat is wrapped by every error about a file that is not a valid
// vector file (wrong magic or version, truncated, bad digest).
var ErrFormat = errors.New("glove: invalid vector file")

// Writer streams a vector file: the header and vocabulary first, then the
// rows in the same order. WriteFile is the one-call form.
type Writer struct {
	bw    *bufio.Writer
	h     hash.Hash
	dim   int
	count int
	enc   Encoding
	rows  int
	buf   []byte
}

// NewWriter writes the header and vocabulary of a file of len(words) rows
// of dim values to w.
func NewWriter(w io.Writer, name string, dim int, enc Encoding, words []string) (*Writer, error) {
	if dim < 1 || dim > maxDim {
		return nil, fmt.Errorf("glove: dimension %d out of range", dim)
	}
	if enc != Float16 && enc != Float32 {
		return nil, fmt.Errorf("glove: unknown encoding %d", enc)
	}
	if len(name) > math.MaxUint16 || len(words) > math.MaxUint32 {
		return nil, fmt.Errorf("glove: name or vocabulary too large")
	}
	seen := make(map[string]struct{}, len(words))
	for _, wd := range words {
		if wd == "" || len(wd) > maxWordBytes || !utf8.ValidString(wd) {
			return nil, fmt.Errorf("glove: invalid word %q", wd)
		}
		if _, dup := seen[wd]; dup {
			return nil, fmt.Errorf("glove: word %q twice", wd)
		}
		seen[wd] = struct{}{}
	}
	h := sha256.New()
	fw := &Writer{bw: bufio.NewWriterSize(io.MultiWriter(w, h), 1<<20), h: h, dim: dim, count: len(words), enc: enc,
		buf: make([]byte, dim*enc.size())}
	var hdr [24]byte
	copy(hdr[:8], magic)
	binary.LittleEndian.PutUint32(hdr[8:], formatVersion)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(dim))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(len(words)))
	hdr[20] = byte(enc)
	binary.LittleEndian.PutUint16(hdr[22:], uint16(len(name)))
	fw.bw.Write(hdr[:])
	fw.bw.WriteString(name)
	var lb [binary.MaxVarintLen64]byte
	for _, wd := range words {
		fw.bw.Write(lb[:binary.PutUvarint(lb[:], uint64(len(wd)))])
		fw.bw.WriteString(wd)
	}
	return fw, nil
}

// WriteRow appends the next row.
func (w *Writer) WriteRow(v []float32) error {
	if len(v) != w.dim {
		return fmt.Errorf("glove: row %d has %d values, want %d", w.rows, len(v), w.dim)
	}
	if w.rows >= w.count {
		return fmt.Errorf("glove: more rows than words")
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("glove: row %d: non-finite value", w.rows)
		}
		if w.enc == Float16 {
			binary.LittleEndian.PutUint16(w.buf[2*i:], f32ToF16(x))
		} else {
			binary.LittleEndian.PutUint32(w.buf[4*i:], math.Float32bits(x))
		}
	}
	w.rows++
	_, err := w.bw.Write(w.buf)
	return err
}

// Close writes the digest; it fails if rows are missing.
func (w *Writer) Close() error {
	if w.rows != w.count {
		return fmt.Errorf("glove: %d rows written for %d words", w.rows, w.count)
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	// The digest covers every byte before it; writing it through the
	// hashing writer too is harmless, the hash is not read again.
	if _, err := w.bw.Write(w.h.Sum(nil)); err != nil {
		return err
	}
	return w.bw.Flush()
}

// WriteFile writes a vector file atomically: to a temporary file in the same
// directory, synced, then renamed over path.
func WriteFile(path, name string, enc Encoding, words []string, rows [][]float32) error {
	if len(rows) != len(words) {
		return fmt.Errorf("glove: %d rows for %d words", len(rows), len(words))
	}
	dim := 0
	if len(rows) > 0 {
		dim = len(rows[0])
	}
	return writeAtomic(path, func(f io.Writer) error {
		w, err := NewWriter(f, name, dim, enc, words)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := w.WriteRow(r); err != nil {
				return err
			}
		}
		return w.Close()
	})
}

func writeAtomic(path string, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("glove: %w", err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("glove: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := fill(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("glove: sync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("glove: %w", err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("glove: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("glove: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename is durable once the directory is synced
		d.Close()
	}
	return nil
}

// table is a parsed file.
type table struct {
	name   string
	dim    int
	enc    Encoding
	words  []string
	rows   []byte // count*dim values in enc, little endian
	digest string
}

func parse(data []byte) (*table, error) {
	if len(data) < 24+32 || string(data[:8]) != magic {
		return nil, fmt.Errorf("%w: not a vector file", ErrFormat)
	}
	body, sum := data[:len(data)-32], data[len(data)-32:]
	got := sha256.Sum256(body)
	if !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: digest mismatch (truncated or corrupt)", ErrFormat)
	}
	if v := binary.LittleEndian.Uint32(body[8:]); v != formatVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrFormat, v, formatVersion)
	}
	t := &table{
		dim:    int(binary.LittleEndian.Uint32(body[12:])),
		enc:    Encoding(body[20]),
		digest: hex.EncodeToString(sum),
	}
	count := int(binary.LittleEndian.Uint32(body[16:]))
	if t.dim < 1 || t.dim > maxDim || (t.enc != Float16 && t.enc != Float32) {
		return nil, fmt.Errorf("%w: dimension %d or encoding %d", ErrFormat, t.dim, t.enc)
	}
	nameLen := int(binary.LittleEndian.Uint16(body[22:]))
	p := 24
	if p+nameLen > len(body) {
		return nil, fmt.Errorf("%w: truncated name", ErrFormat)
	}
	t.name = string(body[p : p+nameLen])
	p += nameLen
	if count > (len(body)-p)/(1+t.dim*t.enc.size()) {
		return nil, fmt.Errorf("%w: %d words cannot fit", ErrFormat, count)
	}
	// One string for the whole vocabulary, the words slices of it: one
	// allocation instead of one per word.
	vocabStart := p
	for i := 0; i < count; i++ {
		n, k := binary.Uvarint(body[p:])
		if k <= 0 || n == 0 || n > maxWordBytes || p+k+int(n) > len(body) {
			return nil, fmt.Errorf("%w: bad word %d", ErrFormat, i)
		}
		p += k + int(n)
	}
	vocab := string(body[vocabStart:p])
	p = vocabStart
	t.words = make([]string, count)
	for i := range t.words {
		n, k := binary.Uvarint(body[p:])
		if k <= 0 || n == 0 || n > maxWordBytes || p+k+int(n) > len(body) {
			return nil, fmt.Errorf("%w: bad word %d", ErrFormat, i)
		}
		p += k
		t.words[i] = vocab[p-vocabStart : p-vocabStart+int(n)]
		p += int(n)
	}
	rows := body[p:]
	if len(rows) != count*t.dim*t.enc.size() {
		return nil, fmt.Errorf("%w: %d bytes of rows, want %d", ErrFormat, len(rows), count*t.dim*t.enc.size())
	}
	t.rows = rows
	return t, nil
}
