package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// ReceivedSpan is one span as an OTLP receiver decoded it.
type ReceivedSpan struct {
	Service    string
	Name       string
	TraceID    []byte
	ParentID   []byte
	Attributes map[string]string
}

// Receiver is an in-process OTLP/HTTP traces endpoint: it speaks
// the real wire protocol (protobuf ExportTraceServiceRequest on /v1/traces).
type Receiver struct {
	URL string

	mu    sync.Mutex
	spans []ReceivedSpan
}

// NewReceiver starts a receiver that stops when t ends.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/v1/traces"
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 32<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []ReceivedSpan
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range sp.GetAttributes() {
					v := kv.GetValue()
					switch {
					case v.GetStringValue() != "":
						attrs[kv.GetKey()] = v.GetStringValue()
					default:
						attrs[kv.GetKey()] = v.String()
					}
				}
				got = append(got, ReceivedSpan{Service: service, Name: sp.GetName(), TraceID: sp.GetTraceId(), ParentID: sp.GetParentSpanId(), Attributes: attrs})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns what was received so far.
func (r *Receiver) Spans() []ReceivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ReceivedSpan(nil), r.spans...)
}
