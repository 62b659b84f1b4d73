// Package reporoot finds the Dockyard repository the tests run in, however they were compiled:
// with -trimpath (make's settings) a source file's path is relative to its module and names no
// directory, so the repository is found from the working directory, which go test and ginkgo
// set to the package's directory.
package reporoot

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/pkg/errors"
)

const module = "module github.com/dockyard-dev/dockyard\n"

// Find returns the repository's root: from this file's location when it is an absolute path
// inside the repository, else the nearest directory at or above the working directory whose
// go.mod is Dockyard's.
func Find() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if dir := filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..")); isRoot(dir) {
			return dir, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", errors.Wrap(err, "finding the Dockyard repository")
	}
	return above(wd)
}

// above returns the nearest directory at or above dir whose go.mod is Dockyard's.
func above(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if isRoot(d) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.Errorf("no Dockyard repository (go.mod of github.com/dockyard-dev/dockyard) at or above %s", dir)
		}
	}
}

func isRoot(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && strings.HasPrefix(string(data), module)
}
