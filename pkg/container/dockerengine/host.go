package dockerengine

import (
	"github.com/moby/moby/client"
	"github.com/pkg/errors"
)

// NewWithHost connects to the Docker engine at host (e.g. unix:///var/run/docker.sock or
// tcp://127.0.0.1:2375), whatever DOCKER_HOST says; the API version is negotiated.
func NewWithHost(host string) (*Runtime, error) {
	c, err := client.New(client.FromEnv, client.WithHost(host))
	if err != nil {
		return nil, errors.Wrapf(err, "creating Docker client for %s", host)
	}
	return NewFromClient(c), nil
}
