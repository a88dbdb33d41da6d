package telemetry

import (
	"github.com/mementohq/memento/telemetry/otlptest"

	"context"
	"testing"
	"time"
)

func TestOffInstallsNothing(t *testing.T) {
	tr, err := Start(context.Background(), Config{})
	if err != nil || tr != nil {
		t.Fatalf("Start with no endpoint = %v, %v; want nil, nil", tr, err)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown of nil: %v", err)
	}
}

func TestSpansReachAnOTLPReceiver(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	ctx := context.Background()
	tr, err := Start(ctx, Config{Endpoint: rcv.URL, ServiceName: "memento-test"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Tracer.Start(ctx, "unit.span")
	span.End()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tr.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].Name != "unit.span" {
		t.Fatalf("received %+v, want one span unit.span", spans)
	}
	if spans[0].Service != "memento-test" {
		t.Errorf("service.name = %q", spans[0].Service)
	}
	if err := tr.Shutdown(fctx); err != nil {
		t.Fatal(err)
	}
}
