// Command registry-proxy is the front of Dockyard's local registry image (dockyard registry
// create): it starts distribution's registry (the command after its flags), which listens on
// the container's loopback only (--backend), and serves the registry's port (--listen) itself,
// forwarding what it allows:
//
//   - With REGISTRY_AUTH=htpasswd, every request needs basic authentication of a user of the
//     htpasswd file REGISTRY_AUTH_HTPASSWD_PATH (bcrypt), or gets 401 UNAUTHORIZED with a Basic
//     challenge of realm REGISTRY_AUTH_HTPASSWD_REALM. Those variables are taken out of
//     distribution's environment: the proxy is the one gate.
//   - A read (GET, HEAD) of any path is forwarded, for any user.
//   - A write (any other method) must address a repository (/v2/<name>/manifests/..., blobs/...,
//     blobs/uploads/...), else 403 DENIED. With DOCKYARD_REGISTRY_PUSH ("user=prefix,...", the
//     prefix "*" for any repository), a user writes only to repositories whose name starts with
//     its prefix, and a user it does not list nowhere: else 403 DENIED naming the prefix.
//     Without authentication or without DOCKYARD_REGISTRY_PUSH, a write may go anywhere.
//   - Unless DOCKYARD_REGISTRY_MUTABLE_TAGS=true, a manifest PUT by tag (or with ?tag=) whose tag
//     names another manifest already is refused with 409 TAG_INVALID naming the tag; the same
//     manifest again is forwarded. Deleting a tag, where distribution allows deletes, frees it.
//
// Its refusals are logged with the method, path, user and reason, never a credential.
// dockyard-build compiles this file alone into the registry image (cmd/tools/imagebuild).
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pkg/errors"
	"golang.org/x/crypto/bcrypt"
)

// The environment the proxy reads; the REGISTRY_AUTH ones are distribution's own names.
const (
	envAuth        = "REGISTRY_AUTH"
	envHtpasswd    = "REGISTRY_AUTH_HTPASSWD_PATH"
	envRealm       = "REGISTRY_AUTH_HTPASSWD_REALM"
	envPush        = "DOCKYARD_REGISTRY_PUSH"
	envMutableTags = "DOCKYARD_REGISTRY_MUTABLE_TAGS"
	// anyRepository is the push prefix of a user who may write anywhere.
	anyRepository = "*"
	// maxManifest is the largest manifest body the proxy reads to check its tag: distribution's
	// own limit.
	maxManifest = 4 << 20
	// maxVerified bounds the cache of credentials already checked against their bcrypt hash.
	maxVerified = 1024
)

// manifestTypes are the media types a tag may name: asking for all of them makes distribution
// answer with the manifest as pushed, whose digest is the tag's.
var manifestTypes = strings.Join([]string{
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.docker.distribution.manifest.v1+prettyjws",
}, ", ")

var (
	// repositoryName is distribution's grammar of a repository name.
	repositoryName = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	// repositoryRoute is what follows a repository's name in the paths of distribution's API.
	repositoryRoute = regexp.MustCompile(`^(?:manifests/[^/]+|blobs/uploads/[^/]*|blobs/[^/]+|tags/list|referrers/[^/]+)$`)
)

// config is what the proxy enforces.
type config struct {
	// backend is distribution's address.
	backend *url.URL
	// realm is the Basic challenge's realm.
	realm string
	// users maps each user to its bcrypt hash; nil requires no authentication.
	users map[string][]byte
	// push maps each user to the prefix of the repositories it may write to (anyRepository:
	// all); nil lets anyone write anywhere.
	push map[string]string
	// mutableTags lets a push move a tag to another manifest.
	mutableTags bool
}

// loadConfig reads the configuration from the environment (getenv) and the htpasswd file it
// names, for distribution at backend (host:port).
func loadConfig(getenv func(string) string, backend string) (config, error) {
	cfg := config{
		backend:     &url.URL{Scheme: "http", Host: backend},
		realm:       getenv(envRealm),
		mutableTags: getenv(envMutableTags) == "true",
	}
	switch auth := getenv(envAuth); auth {
	case "":
	case "htpasswd":
		content, err := os.ReadFile(getenv(envHtpasswd))
		if err != nil {
			return config{}, errors.Wrapf(err, "reading the users (%s)", envHtpasswd)
		}
		if cfg.users, err = parseHtpasswd(string(content)); err != nil {
			return config{}, err
		}
	default:
		return config{}, errors.Errorf("%s=%s: only htpasswd is supported", envAuth, auth)
	}
	if push := getenv(envPush); push != "" {
		var err error
		if cfg.push, err = parsePush(push); err != nil {
			return config{}, err
		}
	}
	return cfg, nil
}

// parseHtpasswd reads "user:bcrypt hash" lines; blank lines and # comments are skipped.
func parseHtpasswd(content string) (map[string][]byte, error) {
	users := map[string][]byte{}
	for i, line := range strings.Split(content, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" || !strings.HasPrefix(hash, "$2") {
			return nil, errors.Errorf("line %d of the htpasswd file is not user:bcrypt hash", i+1)
		}
		users[user] = []byte(hash)
	}
	if len(users) == 0 {
		return nil, errors.New("the htpasswd file has no user")
	}
	return users, nil
}

// parsePush reads DOCKYARD_REGISTRY_PUSH: "user=prefix" entries separated by commas, each prefix
// anyRepository or ending in "/".
func parsePush(s string) (map[string]string, error) {
	push := map[string]string{}
	for _, entry := range strings.Split(s, ",") {
		user, prefix, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || user == "" || prefix != anyRepository && !strings.HasSuffix(prefix, "/") {
			return nil, errors.Errorf("%s: %q is not user=prefix/ or user=%s", envPush, entry, anyRepository)
		}
		push[user] = prefix
	}
	return push, nil
}

// childEnv is distribution's environment: the proxy's without authentication, which the proxy
// does.
func childEnv(env []string) []string {
	var out []string
	for _, e := range env {
		if name, _, _ := strings.Cut(e, "="); name != envAuth && !strings.HasPrefix(name, envAuth+"_") {
			out = append(out, e)
		}
	}
	return out
}

// proxy is the registry's front: an http.Handler.
type proxy struct {
	cfg     config
	forward http.Handler
	client  *http.Client
	logf    func(format string, args ...any)

	// tagMu makes looking a tag up and pushing it one step: two pushes of a new tag never both
	// find it free.
	tagMu sync.Mutex
	// verified holds the hashes of user\x00password pairs that matched their bcrypt hash, so a
	// client's every request does not cost a bcrypt comparison.
	mu       sync.Mutex
	verified map[[32]byte]bool
}

func newProxy(cfg config, logf func(format string, args ...any)) *proxy {
	p := &proxy{cfg: cfg, logf: logf, client: &http.Client{Timeout: time.Minute}, verified: map[[32]byte]bool{}}
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(cfg.backend)
			// Distribution names upload locations after the Host the client used.
			r.Out.Host = r.In.Host
			r.Out.Header.Del("Authorization")
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			logf("forwarding %s %s: %v", r.Method, r.URL.Path, err)
			writeError(w, http.StatusBadGateway, "UNAVAILABLE", "the registry does not answer")
		},
	}
	return p
}

// ServeHTTP authenticates, authorizes writes and checks pushed tags, then forwards.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, ok := p.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+strings.ReplaceAll(p.cfg.realm, `"`, "")+`"`)
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		p.forward.ServeHTTP(w, r)
		return
	}
	if !p.authorizeWrite(w, r, user) {
		return
	}
	if name, tags := pushedTags(r); len(tags) > 0 && !p.cfg.mutableTags {
		p.pushTagged(w, r, user, name, tags)
		return
	}
	p.forward.ServeHTTP(w, r)
}

// authenticate returns the request's user; false when the registry requires authentication and
// the request's is missing or wrong.
func (p *proxy) authenticate(r *http.Request) (string, bool) {
	if p.cfg.users == nil {
		return "", true
	}
	user, password, ok := r.BasicAuth()
	if !ok {
		return "", false
	}
	hash, known := p.cfg.users[user]
	if !known {
		return "", false
	}
	key := sha256.Sum256([]byte(user + "\x00" + password))
	p.mu.Lock()
	seen := p.verified[key]
	p.mu.Unlock()
	if seen {
		return user, true
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil {
		return "", false
	}
	p.mu.Lock()
	if len(p.verified) >= maxVerified {
		clear(p.verified)
	}
	p.verified[key] = true
	p.mu.Unlock()
	return user, true
}

// authorizeWrite answers a write that the user may not make, and reports whether it may: the
// path must address a repository, and every repository it may be read to address must start
// with the user's prefix.
func (p *proxy) authorizeWrite(w http.ResponseWriter, r *http.Request, user string) bool {
	names := repositories(r.URL.Path)
	if r.URL.RawPath != "" || len(names) == 0 {
		p.refuse(w, r, user, http.StatusForbidden, "DENIED", "a write must address a repository: /v2/<name>/manifests/..., blobs/... or blobs/uploads/...")
		return false
	}
	if p.cfg.push == nil {
		return true
	}
	prefix, listed := p.cfg.push[user]
	if !listed {
		p.refuse(w, r, user, http.StatusForbidden, "DENIED", user+" may pull but push to no repository")
		return false
	}
	for _, name := range names {
		if prefix != anyRepository && !strings.HasPrefix(name, prefix) {
			p.refuse(w, r, user, http.StatusForbidden, "DENIED", user+" may push only to repositories under "+prefix+", not to "+name)
			return false
		}
	}
	return true
}

// repositories are the repositories a /v2/ path may address: each prefix of what follows /v2/
// that is a repository name followed by one of distribution's routes.
func repositories(path string) []string {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return nil
	}
	var names []string
	for i := range len(rest) {
		if rest[i] == '/' && repositoryName.MatchString(rest[:i]) && repositoryRoute.MatchString(rest[i+1:]) {
			names = append(names, rest[:i])
		}
	}
	return names
}

// pushedTags are the tags a manifest PUT sets, with its repository: the reference of the path
// when it is a tag (a digest holds a ':'), and the ?tag= parameters.
func pushedTags(r *http.Request) (string, []string) {
	if r.Method != http.MethodPut {
		return "", nil
	}
	rest, _ := strings.CutPrefix(r.URL.Path, "/v2/")
	i := strings.LastIndex(rest, "/manifests/")
	if i <= 0 {
		return "", nil
	}
	name, ref := rest[:i], rest[i+len("/manifests/"):]
	tags := r.URL.Query()["tag"]
	if !strings.Contains(ref, ":") {
		tags = append(tags, ref)
	}
	return name, tags
}

// pushTagged forwards a manifest PUT whose tags each name no manifest yet, or this one.
func (p *proxy) pushTagged(w http.ResponseWriter, r *http.Request, user, name string, tags []string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxManifest+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "MANIFEST_INVALID", "reading the manifest: "+err.Error())
		return
	}
	if len(body) > maxManifest {
		writeError(w, http.StatusBadRequest, "MANIFEST_INVALID", "the manifest is larger than 4 MiB")
		return
	}
	sum := sha256.Sum256(body)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	p.tagMu.Lock()
	defer p.tagMu.Unlock()
	for _, tag := range tags {
		current, err := p.tagDigest(r.Context(), name, tag)
		if err != nil {
			p.logf("looking up %s:%s: %v", name, tag, err)
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "cannot tell whether tag "+tag+" exists")
			return
		}
		if current != "" && current != digest {
			p.refuse(w, r, user, http.StatusConflict, "TAG_INVALID",
				"tag "+tag+" of "+name+" names "+current+" already and this registry's tags are immutable: push another tag")
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	p.forward.ServeHTTP(w, r)
}

// tagDigest is the digest of the manifest a tag names on distribution, "" when it names none.
func (p *proxy) tagDigest(ctx context.Context, name, tag string) (string, error) {
	u := p.cfg.backend.JoinPath("v2", name, "manifests", tag)
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), http.NoBody)
	if err != nil {
		return "", errors.Wrap(err, "asking for the tag")
	}
	req.Header.Set("Accept", manifestTypes)
	resp, err := p.client.Do(req)
	if err != nil {
		return "", errors.Wrap(err, "asking for the tag")
	}
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", nil
	case resp.StatusCode != http.StatusOK:
		return "", errors.Errorf("the registry answered %s", resp.Status)
	case resp.Header.Get("Docker-Content-Digest") == "":
		return "", errors.New("the registry answered without the manifest's digest")
	}
	return resp.Header.Get("Docker-Content-Digest"), nil
}

// refuse answers with a registry error and logs the refusal.
func (p *proxy) refuse(w http.ResponseWriter, r *http.Request, user string, status int, code, message string) {
	if user == "" {
		user = "anonymous"
	}
	p.logf("refused %s %s to %s: %s", r.Method, r.URL.Path, user, message)
	writeError(w, status, code, message)
}

// writeError answers as distribution does: {"errors": [{"code", "message"}]}.
func writeError(w http.ResponseWriter, status int, code, message string) {
	type registryError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	body, _ := json.Marshal(map[string][]registryError{"errors": {{Code: code, Message: message}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		log.Printf("registry-proxy: %v", err)
		os.Exit(1)
	}
}

// run starts distribution's registry (the arguments after the flags), waits until it answers,
// serves until it exits or a signal to stop arrives, which it passes on.
func run(args []string) error {
	flags := flag.NewFlagSet("registry-proxy", flag.ContinueOnError)
	listen := flags.String("listen", ":5000", "the address the registry is served on")
	backend := flags.String("backend", "127.0.0.1:5001", "distribution's address (its configuration's http.addr)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() == 0 {
		return errors.New("no registry command after the flags")
	}
	cfg, err := loadConfig(os.Getenv, *backend)
	if err != nil {
		return err
	}
	child := exec.Command(flags.Arg(0), flags.Args()[1:]...)
	child.Env, child.Stdout, child.Stderr = childEnv(os.Environ()), os.Stdout, os.Stderr
	if err := child.Start(); err != nil {
		return errors.Wrap(err, "starting the registry")
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	return serve(cfg, *listen, child, exited, stop)
}

// serve waits for distribution, then serves the proxy until distribution exits (its error) or
// stop says to stop (passed on to distribution, waited for).
func serve(cfg config, listen string, child *exec.Cmd, exited <-chan error, stop <-chan os.Signal) error {
	if err := waitBackend(cfg.backend, exited, stop); err != nil {
		_ = child.Process.Kill()
		return err
	}
	server := &http.Server{Addr: listen, Handler: newProxy(cfg, log.Printf), ReadHeaderTimeout: 30 * time.Second}
	failed := make(chan error, 1)
	go func() { failed <- server.ListenAndServe() }()
	log.Printf("registry-proxy: serving %s (authentication %v, per-user push prefixes %v, mutable tags %v)",
		listen, cfg.users != nil, cfg.push != nil, cfg.mutableTags)
	select {
	case err := <-exited:
		return errors.Wrap(err, "the registry exited")
	case err := <-failed:
		_ = child.Process.Kill()
		return errors.Wrapf(err, "serving %s", listen)
	case sig := <-stop:
		_ = child.Process.Signal(sig)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = server.Shutdown(ctx)
		return errors.Wrap(<-exited, "the registry stopping")
	}
}

// waitBackend waits until distribution answers at backend (a minute at most).
func waitBackend(backend *url.URL, exited <-chan error, stop <-chan os.Signal) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.Get(backend.JoinPath("v2/").String())
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Wrapf(err, "the registry does not answer at %s", backend.Host)
		}
		select {
		case err := <-exited:
			return errors.Wrap(err, "the registry exited")
		case <-stop:
			return errors.New("stopped before the registry answered")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
