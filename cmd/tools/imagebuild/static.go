package imagebuild

import (
	"debug/elf"

	"github.com/pkg/errors"
)

// checkStatic refuses a binary that needs a dynamic loader: component images hold nothing
// but their binary, so a dynamically linked one (a Go binary built with cgo, the default when
// a C compiler is present) fails to start there with "exec /manager: no such file or
// directory".
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return errors.Wrapf(err, "reading %s as an executable", path)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.Errorf("%s is dynamically linked (built with cgo), and an image holding it alone would not start: build it with CGO_ENABLED=0 (make dockyard does)", path)
		}
	}
	return nil
}
