package kubernetes

import (
	"bytes"
	"context"
	"io"
	"path"
	"strings"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Exec runs a command in the Pod's container over the exec API (WebSocket, else SPDY) and
// returns its exit code. The exec API takes no environment: variables are set by env(1) in
// the container. ErrNotFound when the owner has no such Pod; a Pod not running is an error.
func (r *Runtime) Exec(ctx context.Context, name string, opts container.ExecOptions) (int, error) {
	if opts.User != "" {
		return -1, errors.Errorf("exec in container %s as user %s: the exec API runs commands as the container's user", name, opts.User)
	}
	pod, err := r.ownPod(ctx, name)
	if err != nil {
		return -1, errors.Wrapf(err, "exec in container %s", name)
	}
	if st := mainStatus(pod); st == nil || st.State.Running == nil {
		return -1, errors.Errorf("exec in container %s: its Pod is not running (%s)", name, lastWords(pod))
	}
	cmd := opts.Cmd
	if len(opts.Env) > 0 {
		cmd = append(append([]string{"env"}, opts.Env...), cmd...)
	}
	req := r.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.namespace).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: mainContainer, Command: cmd, Stdin: opts.Stdin != nil, Stdout: true, Stderr: true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(r.config, "GET", req.URL().String())
	if err != nil {
		return -1, errors.Wrapf(err, "exec in container %s", name)
	}
	spdy, err := remotecommand.NewSPDYExecutor(r.config, "POST", req.URL())
	if err != nil {
		return -1, errors.Wrapf(err, "exec in container %s", name)
	}
	// Only a refused upgrade falls back: a command that ran must not run twice.
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return -1, errors.Wrapf(err, "exec in container %s", name)
	}
	stdout, stderr := container.ExecStreams(opts)
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: opts.Stdin, Stdout: stdout, Stderr: stderr})
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit) && exit.Exited():
		return exit.ExitStatus(), nil
	}
	return -1, errors.Wrapf(err, "exec %s in container %s", strings.Join(opts.Cmd, " "), name)
}

// run runs a command and returns an error with its standard error when it fails.
func (r *Runtime) run(ctx context.Context, name string, stdin io.Reader, stdout io.Writer, cmd ...string) error {
	var stderr bytes.Buffer
	code, err := r.Exec(ctx, name, container.ExecOptions{Cmd: cmd, Stdin: stdin, Stdout: stdout, Stderr: &stderr})
	if err != nil {
		return err
	}
	if code != 0 {
		return errors.Errorf("%s in container %s exited %d: %s", strings.Join(cmd, " "), name, code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// CopyToContainer extracts a tar stream into a directory of the container with its tar.
func (r *Runtime) CopyToContainer(ctx context.Context, name, dir string, tarStream io.Reader) error {
	return errors.Wrapf(r.run(ctx, name, tarStream, nil, "tar", "-x", "-f", "-", "-C", dir), "copying into %s of container %s", dir, name)
}

// CopyFromContainer returns a tar stream of a path in the container, named by its base name as
// Docker names it; ErrNotFound when the container or the path does not exist.
func (r *Runtime) CopyFromContainer(ctx context.Context, name, file string) (io.ReadCloser, error) {
	code, err := r.Exec(ctx, name, container.ExecOptions{Cmd: []string{"test", "-e", file}})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, errors.Wrapf(container.ErrNotFound, "%s in container %s", file, name)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(r.run(ctx, name, nil, pw, "tar", "-c", "-f", "-", "-C", path.Dir(file), path.Base(file)))
	}()
	return pr, nil
}

// ContainerLogs returns the last lines of the Pod's container output; ErrNotFound when the owner
// has no such Pod.
func (r *Runtime) ContainerLogs(ctx context.Context, name string, tailLines int) (string, error) {
	if _, err := r.ownPod(ctx, name); err != nil {
		return "", errors.Wrapf(err, "reading the logs of container %s", name)
	}
	opts := &corev1.PodLogOptions{Container: mainContainer}
	if tailLines > 0 {
		opts.TailLines = ptrInt64(int64(tailLines))
	}
	b, err := r.client.CoreV1().Pods(r.namespace).GetLogs(name, opts).DoRaw(ctx)
	if err != nil {
		return "", notFound(err, "reading the logs of container %s", name)
	}
	return string(b), nil
}

func ptrInt64(v int64) *int64 { return &v }
