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

// trimAnswer is the body of a failed answer as the engine passes it on.
func trimAnswer(contentType string, raw []byte) []byte {
	if strings.HasPrefix(contentType, "application/json") {
		var s metav1.Status
		if json.Unmarshal(raw, &s) == nil && s.Kind == "Status" {
			s.Message = cut(s.Message, maxStatusMessage)
			if s.Details != nil {
				for i := range s.Details.Causes {
					s.Details.Causes[i].Message = cut(s.Details.Causes[i].Message, maxAnswerLine)
				}
			}
			if out, err := json.Marshal(s); err == nil {
				return out
			}
		}
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return []byte(cut(line, maxAnswerLine))
		}
	}
	return nil
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
