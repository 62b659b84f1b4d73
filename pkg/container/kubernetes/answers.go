package kubernetes

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// The server the engine dials is the one a team's kubeconfig names, and what it answers to a
// request that failed reaches conditions and events through the engine's errors. client-go
// quotes up to 2 KiB of an answer that is no Kubernetes Status, and a Status's message whole; a
// person needs a line. trimmedAnswers, around every request, cuts the body of a failed
// answer: a Status's message to maxStatusMessage bytes, anything else to its first line of at
// most maxAnswerLine bytes.
const (
	maxAnswerLine    = 200
	maxStatusMessage = 512
	// maxAnswerRead is how much of a failed answer is read at all.
	maxAnswerRead = 64 << 10
)

type trimmedAnswers struct{ next http.RoundTripper }

func (t trimmedAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < http.StatusBadRequest || resp.Body == nil {
		return resp, err
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerRead))
	_ = resp.Body.Close()
	body := trimAnswer(resp.Header.Get("Content-Type"), raw)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return resp, nil
}

// trimAnswer is the body of a failed answer as the engine passes it on: a Status (JSON, or
// protobuf, which client-go asks built-in types in) trimmed and encoded as it came, so that its
// reason and message reach the engine's errors; any other body's first line.
func trimAnswer(contentType string, raw []byte) []byte {
	switch {
	case strings.HasPrefix(contentType, "application/json"):
		var s metav1.Status
		if json.Unmarshal(raw, &s) == nil && s.Kind == "Status" {
			trimStatus(&s)
			if out, err := json.Marshal(s); err == nil {
				return out
			}
		}
	case strings.HasPrefix(contentType, runtime.ContentTypeProtobuf):
		return trimProtobufStatus(raw)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return []byte(cut(line, maxAnswerLine))
		}
	}
	return nil
}

// trimStatus cuts a Status's message and its causes'.
func trimStatus(s *metav1.Status) {
	s.Message = cut(s.Message, maxStatusMessage)
	if s.Details != nil {
		for i := range s.Details.Causes {
			s.Details.Causes[i].Message = cut(s.Details.Causes[i].Message, maxAnswerLine)
		}
	}
}

// trimProtobufStatus is a Status in protobuf, trimmed; nothing when the body is none (its bytes
// are no text to quote).
func trimProtobufStatus(raw []byte) []byte {
	scheme := runtime.NewScheme()
	v1 := schema.GroupVersion{Version: "v1"}
	scheme.AddKnownTypes(v1, &metav1.Status{})
	codec := protobuf.NewSerializer(scheme, scheme)
	obj, _, err := codec.Decode(raw, nil, nil)
	s, ok := obj.(*metav1.Status)
	if err != nil || !ok {
		return nil
	}
	trimStatus(s)
	s.SetGroupVersionKind(v1.WithKind("Status"))
	var out bytes.Buffer
	if err := codec.Encode(s, &out); err != nil {
		return nil
	}
	return out.Bytes()
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
