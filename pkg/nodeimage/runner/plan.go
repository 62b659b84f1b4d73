package runner

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// SuccessSentinel is the file Cluster API's bootstrap data writes once kubeadm succeeded.
const SuccessSentinel = "/run/cluster-api/bootstrap-success.complete"

// Archive renders a plan as the tar archive UploadCommand unpacks: the runner's scripts, the
// plan file, one staged file per file step and one step script per run of consecutive command
// steps. Content travels only inside the archive, never in arguments.
//
// Like cloud-init, consecutive commands run in one shell (cd and export carry over) and a
// failing command does not stop the ones after it; the first failure is recorded. When the data
// writes Cluster API's success sentinel, the bootstrap succeeded if and only if the sentinel
// exists at the end; otherwise, if and only if nothing failed.
func Archive(plan *bootstrap.Plan, timeout time.Duration) ([]byte, error) {
	a := newArchive()
	fmt.Fprintf(&a.plan, "%s %d\n", CmdStart, Seconds(timeout))
	sentinel := false
	for i, step := range plan.Steps {
		n := i + 1
		switch {
		case step.File != nil:
			a.flushShell()
			f := step.File
			sentinel = sentinel || f.Path == SuccessSentinel
			a.add(FilesDir+"/"+strconv.Itoa(n), 0o600, f.Content)
			appendFlag := "0"
			if f.Append {
				appendFlag = "1"
			}
			fmt.Fprintf(&a.plan, "%s %d %s %04o %s %s %s\n", CmdFile, n, bootstrap.ShellQuote(f.Path), fileMode(f.Mode),
				bootstrap.ShellQuote(orDefault(f.Owner, "root")), bootstrap.ShellQuote(orDefault(f.Group, "root")), appendFlag)
		case step.Command != nil:
			body := step.Command.Script
			if len(step.Command.Args) > 0 {
				body = step.Command.String()
			}
			sentinel = sentinel || strings.Contains(body, SuccessSentinel)
			a.command(n, body)
		default:
			return nil, errors.Errorf("bootstrap step %d has neither a file nor a command", n)
		}
	}
	a.flushShell()
	if sentinel {
		fmt.Fprintf(&a.plan, "%s %s\n", CmdFinish, SuccessSentinel)
	} else {
		fmt.Fprintln(&a.plan, CmdFinish)
	}
	a.add(PlanFile, 0o600, a.plan.Bytes())
	a.add(RunScript, 0o700, runScript)
	a.add(LibScript, 0o600, libScript)
	if a.err == nil {
		a.err = a.tw.Close()
	}
	if a.err != nil {
		return nil, errors.Wrap(a.err, "writing the bootstrap archive")
	}
	return a.buf.Bytes(), nil
}

// archive accumulates an Archive; the first error sticks.
type archive struct {
	buf  bytes.Buffer
	tw   *tar.Writer
	err  error
	plan bytes.Buffer
	// shell is the step script being written, for the steps from shellFirst on.
	shell      *strings.Builder
	shellFirst int
}

func newArchive() *archive {
	a := &archive{}
	a.tw = tar.NewWriter(&a.buf)
	for _, dir := range []string{FilesDir + "/", StepsDir + "/"} {
		a.write(&tar.Header{Name: dir, Mode: 0o700, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}, nil)
	}
	return a
}

func (a *archive) add(name string, mode int64, content []byte) {
	a.write(&tar.Header{Name: name, Mode: mode, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}, content)
}

func (a *archive) write(h *tar.Header, content []byte) {
	if a.err != nil {
		return
	}
	if a.err = a.tw.WriteHeader(h); a.err == nil && len(content) > 0 {
		_, a.err = a.tw.Write(content)
	}
}

// command adds a command step to the current step script.
func (a *archive) command(step int, body string) {
	if a.shell == nil {
		a.shell, a.shellFirst = &strings.Builder{}, step
		a.shell.WriteString("# Written by Dockyard: bootstrap commands, run in one shell like cloud-init's runcmd.\n")
		a.shell.WriteString(`. "$__dockyard_dir/` + LibScript + "\"\n")
	}
	fmt.Fprintf(a.shell, "%s %d\n%s\n%s %d $?\n", StepMarker, step, strings.TrimRight(body, "\n"), DoneMarker, step)
}

// flushShell ends the current step script, if any.
func (a *archive) flushShell() {
	if a.shell == nil {
		return
	}
	name := fmt.Sprintf("%s/shell-%d.sh", StepsDir, a.shellFirst)
	a.add(name, 0o600, []byte(a.shell.String()))
	fmt.Fprintf(&a.plan, "%s %d %s\n", CmdShell, a.shellFirst, name)
	a.shell = nil
}

// fileMode returns a file mode as the octal number chmod takes, special bits included.
func fileMode(m os.FileMode) uint32 {
	mode := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// PlanCommand is one line of a plan file: a command (CmdStart, CmdFile, ...) and its
// arguments, unquoted.
type PlanCommand struct {
	Name string
	Args []string
}

// ParsePlan reads a plan file. Arguments are unquoted as the shell does for what Archive
// writes (words, single quotes, double quotes without escapes).
func ParsePlan(plan []byte) []PlanCommand {
	var cmds []PlanCommand
	for _, line := range strings.Split(string(plan), "\n") {
		if words := splitWords(line); len(words) > 0 {
			cmds = append(cmds, PlanCommand{Name: words[0], Args: words[1:]})
		}
	}
	return cmds
}

func splitWords(line string) []string {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t':
			if inWord {
				words, inWord = append(words, word.String()), false
				word.Reset()
			}
		case '\'', '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				end = len(line) - i - 1
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// StepCommand is one bootstrap command in a step script.
type StepCommand struct {
	Step int
	Text string
}

// StepCommands reads the commands of a step script Archive wrote.
func StepCommands(script string) []StepCommand {
	var cmds []StepCommand
	var cur *StepCommand
	var body []string
	for _, l := range strings.Split(script, "\n") {
		switch {
		case strings.HasPrefix(l, StepMarker+" "):
			cur, body = &StepCommand{Step: atoi(strings.TrimPrefix(l, StepMarker+" "))}, nil
		case strings.HasPrefix(l, DoneMarker+" ") && cur != nil:
			cur.Text = strings.TrimSpace(strings.Join(body, "\n"))
			cmds = append(cmds, *cur)
			cur = nil
		case cur != nil:
			body = append(body, l)
		}
	}
	return cmds
}
