package podman

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// libpodVersion is the libpod API path prefix; Podman 4.x serves every 4.x client from it.
const libpodVersion = "/v4.0.0/libpod"

// libpod is a small client of Podman's native REST API (what the Docker-compatible API gets
// wrong, see doc.go): plain net/http over the engine's socket, bounded by each call's context.
type libpod struct {
	client *http.Client
	base   string // scheme://host, without the API prefix
}

// newLibpod builds a client for a unix:// or tcp:// endpoint.
func newLibpod(endpoint string) (*libpod, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, errors.Wrapf(err, "parsing Podman endpoint %q", endpoint)
	}
	tr := &http.Transport{MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second}
	switch u.Scheme {
	case "unix":
		sock := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		return &libpod{client: &http.Client{Transport: tr}, base: "http://podman"}, nil
	case "tcp", "http":
		return &libpod{client: &http.Client{Transport: tr}, base: "http://" + u.Host}, nil
	default:
		return nil, errors.Errorf("Podman endpoint %q: want unix:// or tcp://", endpoint)
	}
}

// apiError is the body of a libpod error response.
type apiError struct {
	Cause    string `json:"cause"`
	Message  string `json:"message"`
	Response int    `json:"response"`
}

// do sends a request with an optional JSON body and decodes a JSON answer into out (when not
// nil). An HTTP 404 is wrapped in container.ErrNotFound; what names the call is the caller's.
func (l *libpod) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return errors.Wrap(err, "encoding the request")
		}
		rd = bytes.NewReader(b)
	}
	u := l.base + libpodVersion + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return errors.Wrap(err, "building the request")
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := l.client.Do(req)
	if err != nil {
		return errors.Wrap(err, "calling the Podman API")
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return errors.Wrap(err, "reading the Podman API's answer")
	}
	if res.StatusCode >= 300 {
		return responseError(res.StatusCode, raw)
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	return errors.Wrap(json.Unmarshal(raw, out), "decoding the Podman API's answer")
}

func responseError(status int, raw []byte) error {
	var e apiError
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	if status == http.StatusNotFound {
		return errors.Wrapf(container.ErrNotFound, "%s", msg)
	}
	return errors.Errorf("podman API: %s (HTTP %d)", msg, status)
}
