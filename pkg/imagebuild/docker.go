package imagebuild

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Docker runs the docker command line. The CLI negotiates the API version with whatever
// engine answers (Docker 20.10 here), and a Podman "docker" shim works the same way.
type Docker struct {
	// Command is the docker executable; "docker" when empty.
	Command string
}

func (d *Docker) command() string {
	if d == nil || d.Command == "" {
		return "docker"
	}
	return d.Command
}

// Run runs docker with args, stdin and stdout as given; stderr goes into the error.
func (d *Docker) Run(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, d.command(), args...)
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker %s: %v: %s", strings.Join(shortArgs(args), " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Output runs docker and returns its trimmed standard output.
func (d *Docker) Output(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	err := d.Run(ctx, nil, &out, args...)
	return strings.TrimSpace(out.String()), err
}

func shortArgs(args []string) []string {
	if len(args) > 8 {
		return append(args[:8:8], "...")
	}
	return args
}

// ImagesWithLabel returns the repo:tag names of the images carrying label=value.
func (d *Docker) ImagesWithLabel(ctx context.Context, label, value string) ([]string, error) {
	out, err := d.Output(ctx, "image", "ls", "--filter", "label="+label+"="+value, "--format", "{{.Repository}}:{{.Tag}}")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, "<none>") {
			names = append(names, l)
		}
	}
	return names, nil
}

// ImageID returns the ID of an image, or "" when the engine does not have it.
func (d *Docker) ImageID(ctx context.Context, ref string) string {
	id, err := d.Output(ctx, "image", "inspect", "--format", "{{.Id}}", ref)
	if err != nil {
		return ""
	}
	return id
}

// Load streams images, tagged as given, into the engine (docker load), without writing the
// tarball anywhere.
func (d *Docker) Load(ctx context.Context, images map[name.Reference]v1.Image) error {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(tarball.MultiRefWrite(images, pw))
	}()
	err := d.Run(ctx, pr, io.Discard, "load")
	pr.CloseWithError(io.ErrClosedPipe)
	return err
}

// RemoveImage untags (and deletes when unused) an image; failures are ignored, the image may be
// in use.
func (d *Docker) RemoveImage(ctx context.Context, ref string) {
	_ = d.Run(ctx, nil, io.Discard, "image", "rm", ref)
}
