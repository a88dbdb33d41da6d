// Package tracestore wraps the domain stores so that every store call is an
// OpenTelemetry span (method, tenant, outcome). The engine installs it only
// when tracing is configured, so an untraced engine calls its stores directly.
package tracestore
