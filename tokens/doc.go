// Package tokens counts tokens per model family: exactly for OpenAI's o200k_base and
// cl100k_base encodings (embedded in the binary, no download), approximately (and
// flagged so) for any other model. Counts of repeated texts come from a bounded cache.
package tokens
