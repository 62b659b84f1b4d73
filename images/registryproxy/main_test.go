package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// fakeRegistry stands in for distribution: it keeps the digest of each tag pushed, answers a HEAD
// of a manifest with it, and records the writes it got.
type fakeRegistry struct {
	mu     sync.Mutex
	tags   map[string]string
	writes []string
	auth   []string
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := r.Header.Get("Authorization"); h != "" {
		f.auth = append(f.auth, h)
	}
	rest, _ := strings.CutPrefix(r.URL.Path, "/v2/")
	name, ref, isManifest := strings.Cut(rest, "/manifests/")
	switch {
	case r.Method == http.MethodHead && isManifest:
		digest, ok := f.tags[name+":"+ref]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Docker-Content-Digest", digest)
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPut && isManifest:
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(body)
		f.tags[name+":"+ref] = "sha256:" + hex.EncodeToString(sum[:])
		f.writes = append(f.writes, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		w.WriteHeader(http.StatusOK)
	default:
		f.writes = append(f.writes, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusAccepted)
	}
}

func (f *fakeRegistry) written() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.writes)
}

// testUsers are the users of a registry serving team-a and team-b, as Dockyard makes them, with
// a user known to htpasswd but not allowed to push.
var testUsers = map[string]string{"dockyard.host": "host-secret", "team-a": "a-secret", "team-b": "b-secret", "reader": "r-secret"}

// testProxy serves a proxy of cfg (its backend set to a fake registry) and returns its address
// and the fake.
func testProxy(t *testing.T, cfg config) (string, *fakeRegistry) {
	t.Helper()
	fake := &fakeRegistry{tags: map[string]string{}}
	backend := httptest.NewServer(fake)
	t.Cleanup(backend.Close)
	cfg.backend, _ = url.Parse(backend.URL)
	front := httptest.NewServer(newProxy(cfg, t.Logf))
	t.Cleanup(front.Close)
	return front.URL, fake
}

// authConfig is the configuration of a registry with a user per namespace.
func authConfig(t *testing.T) config {
	t.Helper()
	users := map[string][]byte{}
	for user, password := range testUsers {
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		users[user] = hash
	}
	return config{realm: "reg", users: users, push: map[string]string{"dockyard.host": "*", "team-a": "team-a/", "team-b": "team-b/"}}
}

// do sends a request as user ("" for none) and returns the status and the registry error's code
// and message.
func do(t *testing.T, base, user, method, path, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, testUsers[user])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var errs struct {
		Errors []struct{ Code, Message string } `json:"errors"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(raw, &errs) == nil && len(errs.Errors) > 0 {
		return resp.StatusCode, errs.Errors[0].Code, errs.Errors[0].Message
	}
	return resp.StatusCode, "", ""
}

// A namespace's user writes only under its own prefix and reads everything; the host's writes
// anywhere; a user without a prefix writes nowhere. The backend never sees a refused write.
func TestEachUserPushesUnderItsPrefixOnly(t *testing.T) {
	base, fake := testProxy(t, authConfig(t))
	for _, c := range []struct {
		user, method, path string
		status             int
	}{
		{"team-a", http.MethodPost, "/v2/team-a/app/blobs/uploads/", http.StatusAccepted},
		{"team-a", http.MethodPatch, "/v2/team-a/app/blobs/uploads/0e5d", http.StatusAccepted},
		{"team-a", http.MethodPut, "/v2/team-a/tools/app/blobs/uploads/0e5d", http.StatusAccepted},
		{"team-a", http.MethodPut, "/v2/team-a/app/manifests/sha256:" + strings.Repeat("a", 64), http.StatusCreated},
		{"team-a", http.MethodGet, "/v2/team-b/app/manifests/v1", http.StatusOK},
		{"team-a", http.MethodHead, "/v2/team-b/app/blobs/sha256:" + strings.Repeat("b", 64), http.StatusOK},
		{"team-a", http.MethodGet, "/v2/", http.StatusOK},
		{"team-a", http.MethodGet, "/v2/_catalog", http.StatusOK},
		{"team-b", http.MethodPost, "/v2/team-b/app/blobs/uploads/", http.StatusAccepted},
		{"dockyard.host", http.MethodPost, "/v2/app/blobs/uploads/", http.StatusAccepted},
		{"dockyard.host", http.MethodPost, "/v2/team-b/app/blobs/uploads/", http.StatusAccepted},
		{"reader", http.MethodGet, "/v2/team-a/app/manifests/v1", http.StatusOK},
	} {
		if status, code, msg := do(t, base, c.user, c.method, c.path, "{}"); status != c.status {
			t.Errorf("%s %s as %s: %d %s %s, want %d", c.method, c.path, c.user, status, code, msg, c.status)
		}
	}
	before := fake.written()
	for _, c := range []struct{ user, method, path, says string }{
		{"team-a", http.MethodPost, "/v2/team-b/app/blobs/uploads/", "under team-a/, not to team-b/app"},
		{"team-a", http.MethodPatch, "/v2/team-b/app/blobs/uploads/0e5d", "under team-a/"},
		{"team-a", http.MethodPut, "/v2/team-b/app/manifests/v1", "under team-a/"},
		{"team-a", http.MethodDelete, "/v2/team-b/app/manifests/v1", "under team-a/"},
		{"team-a", http.MethodPut, "/v2/app/manifests/v1", "under team-a/"},
		{"team-a", http.MethodPut, "/v2/team-a/manifests/v1", "under team-a/, not to team-a"},
		{"team-a", http.MethodPut, "/v2/team-ab/app/manifests/v1", "under team-a/"},
		{"team-a", http.MethodPut, "/v2/team-a/../team-b/app/manifests/v1", "must address a repository"},
		{"team-a", http.MethodPut, "/v2/team-a%2F..%2Fteam-b/app/manifests/v1", "must address a repository"},
		{"team-a", http.MethodPost, "/v2/", "must address a repository"},
		{"reader", http.MethodPost, "/v2/team-a/app/blobs/uploads/", "push to no repository"},
	} {
		status, code, msg := do(t, base, c.user, c.method, c.path, "{}")
		if status != http.StatusForbidden || code != "DENIED" || !strings.Contains(msg, c.says) {
			t.Errorf("%s %s as %s: %d %s %q, want 403 DENIED saying %q", c.method, c.path, c.user, status, code, msg, c.says)
		}
	}
	if after := fake.written(); len(after) != len(before) {
		t.Errorf("refused writes reached the registry: %v", after[len(before):])
	}
}

// Without a user, or with a wrong password or an unknown user, every request gets 401 with a
// Basic challenge; the credential never reaches distribution.
func TestBadCredentialsAreUnauthorized(t *testing.T) {
	base, fake := testProxy(t, authConfig(t))
	for _, set := range []func(*http.Request){
		func(*http.Request) {},
		func(r *http.Request) { r.SetBasicAuth("team-a", "b-secret") },
		func(r *http.Request) { r.SetBasicAuth("team-c", "a-secret") },
		func(r *http.Request) { r.Header.Set("Authorization", "Bearer a-secret") },
	} {
		for _, path := range []string{"/v2/", "/v2/team-a/app/manifests/v1"} {
			req, _ := http.NewRequest(http.MethodGet, base+path, nil)
			set(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="reg"` || !strings.Contains(string(body), "UNAUTHORIZED") {
				t.Errorf("GET %s with %q: %d %q %s, want 401 with a Basic challenge", path, req.Header.Get("Authorization"), resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
			}
		}
	}
	// Twice with the right password: the second from the cache.
	for range 2 {
		if status, _, _ := do(t, base, "team-a", http.MethodGet, "/v2/", ""); status != http.StatusOK {
			t.Errorf("GET /v2/ as team-a: %d", status)
		}
	}
	if len(fake.auth) != 0 {
		t.Errorf("distribution got the clients' Authorization headers: %v", fake.auth)
	}
}

// A tag, once pushed, names the same manifest: pushing that manifest again is fine, another is
// refused (TAG_INVALID, naming the tag), by the path or by ?tag=; a push by digest is never
// refused. A registry with mutable tags lets tags move.
func TestTagsAreImmutableUnlessAsked(t *testing.T) {
	for _, auth := range []bool{true, false} {
		cfg := config{}
		user := ""
		if auth {
			cfg, user = authConfig(t), "team-a"
		}
		base, fake := testProxy(t, cfg)
		put := func(path, manifest string) (int, string, string) {
			return do(t, base, user, http.MethodPut, path, manifest)
		}
		if status, code, msg := put("/v2/team-a/app/manifests/v1", `{"one":1}`); status != http.StatusCreated {
			t.Fatalf("first push of v1: %d %s %s", status, code, msg)
		}
		if status, code, msg := put("/v2/team-a/app/manifests/v1", `{"one":1}`); status != http.StatusCreated {
			t.Errorf("the same manifest as v1 again: %d %s %s", status, code, msg)
		}
		pushes := len(fake.written())
		for _, path := range []string{"/v2/team-a/app/manifests/v1", "/v2/team-a/app/manifests/sha256:" + strings.Repeat("c", 64) + "?tag=v1"} {
			status, code, msg := put(path, `{"two":2}`)
			if status != http.StatusConflict || code != "TAG_INVALID" || !strings.Contains(msg, "tag v1 of team-a/app") || !strings.Contains(msg, "immutable") {
				t.Errorf("another manifest as v1 (%s): %d %s %q, want 409 TAG_INVALID naming the tag", path, status, code, msg)
			}
		}
		if len(fake.written()) != pushes {
			t.Errorf("refused pushes reached the registry: %v", fake.written()[pushes:])
		}
		for _, path := range []string{"/v2/team-a/app/manifests/v2", "/v2/team-a/app/manifests/sha256:" + strings.Repeat("c", 64)} {
			if status, code, msg := put(path, `{"two":2}`); status != http.StatusCreated {
				t.Errorf("another manifest as %s: %d %s %s", path, status, code, msg)
			}
		}
	}
	cfg := authConfig(t)
	cfg.mutableTags = true
	base, _ := testProxy(t, cfg)
	for _, manifest := range []string{`{"one":1}`, `{"two":2}`} {
		if status, code, msg := do(t, base, "team-a", http.MethodPut, "/v2/team-a/app/manifests/v1", manifest); status != http.StatusCreated {
			t.Errorf("pushing %s as v1 with mutable tags: %d %s %s", manifest, status, code, msg)
		}
	}
}

// Without authentication any client writes anywhere, as distribution alone would let it.
func TestWithoutAuthenticationAnyoneWritesAnywhere(t *testing.T) {
	base, _ := testProxy(t, config{})
	for _, path := range []string{"/v2/app/blobs/uploads/", "/v2/team-b/app/blobs/uploads/"} {
		if status, code, msg := do(t, base, "", http.MethodPost, path, ""); status != http.StatusAccepted {
			t.Errorf("POST %s: %d %s %s", path, status, code, msg)
		}
	}
}

// The configuration comes from distribution's variables and Dockyard's; distribution's
// environment loses the authentication the proxy does.
func TestConfigFromTheEnvironment(t *testing.T) {
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err := os.WriteFile(htpasswd, []byte("team-a:"+string(hash)+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envAuth: "htpasswd", envHtpasswd: htpasswd, envRealm: "reg",
		envPush: "dockyard.host=*,team-a=team-a/", envMutableTags: "true"}
	cfg, err := loadConfig(func(k string) string { return env[k] }, "127.0.0.1:5001")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.backend.String() != "http://127.0.0.1:5001" || cfg.realm != "reg" || !cfg.mutableTags || len(cfg.users) != 1 ||
		cfg.push["team-a"] != "team-a/" || cfg.push["dockyard.host"] != "*" {
		t.Errorf("configuration %+v", cfg)
	}
	for _, bad := range []map[string]string{
		{envAuth: "token"},
		{envAuth: "htpasswd", envHtpasswd: filepath.Join(t.TempDir(), "missing")},
		{envPush: "team-a=team-a"},
		{envPush: "=team-a/"},
	} {
		if _, err := loadConfig(func(k string) string { return bad[k] }, "127.0.0.1:5001"); err == nil {
			t.Errorf("configuration %v accepted", bad)
		}
	}
	if _, err := parseHtpasswd("team-a:plain\n"); err == nil {
		t.Error("a password that is not a bcrypt hash was accepted")
	}
	got := childEnv([]string{"PATH=/bin", "REGISTRY_AUTH=htpasswd", "REGISTRY_AUTH_HTPASSWD_PATH=/x", "REGISTRY_STORAGE_DELETE_ENABLED=true", envPush + "=a=*"})
	if !slices.Equal(got, []string{"PATH=/bin", "REGISTRY_STORAGE_DELETE_ENABLED=true", envPush + "=a=*"}) {
		t.Errorf("distribution's environment %v", got)
	}
}
