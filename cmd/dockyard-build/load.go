package main

import (
	"context"
	"flag"
	"os"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
)

// runLoad copies images the builder made in Docker into another engine.
func runLoad(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	target := runtimes.FromEnv()
	fs.StringVar(&target.Name, "container-runtime", target.Name, "engine to load the images into: podman or containerd ($"+runtimes.RuntimeEnv+")")
	fs.StringVar(&target.Endpoint, "container-runtime-endpoint", target.Endpoint, "its address; empty: its default ($"+runtimes.EndpointEnv+")")
	_ = fs.Parse(args)
	if fs.NArg() == 0 {
		return errors.New("name the images to load")
	}
	name, err := runtimes.Parse(target.Name)
	if err != nil {
		return err
	}
	target.Name = name
	if target.Name == runtimes.Docker {
		return nil // the builder's own engine has them
	}
	from, err := runtimes.New(runtimes.Config{Name: runtimes.Docker})
	if err != nil {
		return err
	}
	defer func() { _ = from.Close() }()
	to, err := runtimes.New(target)
	if err != nil {
		return err
	}
	defer func() { _ = to.Close() }()
	dst := docker.NewManager(to, docker.ManagerOptions{})
	return errors.Wrap(dst.CopyImagesFrom(ctx, docker.NewManager(from, docker.ManagerOptions{}), fs.Args(), os.Stderr),
		"copying the images from Docker, where make images builds them")
}
