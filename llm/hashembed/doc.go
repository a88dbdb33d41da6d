// Package hashembed is the offline default Embedder: signed feature hashing of
// stemmed word unigrams, word bigrams and character trigrams into D dimensions.
// It needs no model file or network, is deterministic, and knows no synonyms.
package hashembed
