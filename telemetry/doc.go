// Package telemetry sets up OpenTelemetry tracing: spans per HTTP request and
// per store call, exported over OTLP/HTTP when an endpoint is configured.
// Without one nothing is installed, so tracing costs nothing when off.
package telemetry
