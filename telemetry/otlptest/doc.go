// Package otlptest is an in-process OTLP/HTTP trace receiver for tests: it
// decodes the real protobuf wire format, so exporters are tested end to end
// without a collector.
package otlptest
