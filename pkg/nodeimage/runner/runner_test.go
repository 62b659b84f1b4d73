package runner

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

func TestStatusRoundTrip(t *testing.T) {
	for _, want := range []Status{
		{Unit: "inactive", Now: 1700000000},
		{Unit: "active", Locked: true, Now: 1700000100, State: State{Phase: PhaseRunning, Step: 3, Started: 1700000000, Timeout: 300}},
		{Unit: "failed", Locked: true, Now: 1700000100, State: State{Phase: PhaseFailed, Step: 5, Started: 1700000000, Exit: 1, Timeout: 300, Missing: SuccessSentinel}},
	} {
		if got := ParseStatus(string(want.Marshal())); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseStatus(Marshal(%+v)) = %+v", want, got)
		}
	}
}

func TestParsePlanUnquotesWhatArchiveQuotes(t *testing.T) {
	path := "/etc/it's a dir/file"
	plan := []byte(CmdStart + " 300\n" + CmdFile + " 1 " + bootstrap.ShellQuote(path) + " 0600 root root 0\n" + CmdFinish + "\n")
	want := []PlanCommand{
		{Name: CmdStart, Args: []string{"300"}},
		{Name: CmdFile, Args: []string{"1", path, "0600", "root", "root", "0"}},
		{Name: CmdFinish, Args: []string{}},
	}
	if got := ParsePlan(plan); !reflect.DeepEqual(got, want) {
		t.Errorf("ParsePlan = %q, want %q", got, want)
	}
}

func TestArchiveHoldsScriptsPlanAndSteps(t *testing.T) {
	plan := &bootstrap.Plan{Steps: []bootstrap.Step{
		{File: &bootstrap.File{Path: "/etc/a", Content: []byte("secret"), Mode: 0o755 | os.ModeSetuid}},
		{Command: &bootstrap.Command{Script: "echo one"}},
		{Command: &bootstrap.Command{Args: []string{"kubeadm", "join", "--config", "/run/kubeadm/kubeadm-join-config.yaml"}}},
		{Command: &bootstrap.Command{Script: "echo success > " + SuccessSentinel}},
	}}
	files := unpack(t, plan, 90*time.Second)
	if got := string(files[PlanFile]); got != "start 90\nrun_file 1 /etc/a 4755 root root 0\nrun_shell 2 steps/shell-2.sh\nfinish "+SuccessSentinel+"\n" {
		t.Errorf("plan:\n%s", got)
	}
	if !bytes.Equal(files[RunScript], runScript) || !bytes.Equal(files[LibScript], libScript) {
		t.Error("the archive does not carry the embedded runner scripts")
	}
	if string(files[FilesDir+"/1"]) != "secret" {
		t.Errorf("staged file: %q", files[FilesDir+"/1"])
	}
	got := StepCommands(string(files[StepsDir+"/shell-2.sh"]))
	want := []StepCommand{{2, "echo one"}, {3, "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml"}, {4, "echo success > " + SuccessSentinel}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("step commands = %+v, want %+v", got, want)
	}
	if _, err := Archive(&bootstrap.Plan{Steps: []bootstrap.Step{{}}}, time.Minute); err == nil {
		t.Error("a step with neither a file nor a command was accepted")
	}
}

// The scripts themselves, run by the machine's sh in a directory of their own (no systemd):
// what they write is what the Go side reads.
func TestScriptsRunAPlanOnceAndReportIt(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	p := Protocol{Dir: dir, Unit: "dockyard-test-no-such-unit"}
	target := filepath.Join(out, "sub dir", "file")
	plan := &bootstrap.Plan{Steps: []bootstrap.Step{
		{File: &bootstrap.File{Path: target, Content: []byte("a\n"), Mode: 0o640}},
		{File: &bootstrap.File{Path: target, Content: []byte("b\n"), Mode: 0o640, Append: true}},
		{Command: &bootstrap.Command{Script: "export CARRIED=yes; pwd > " + filepath.Join(out, "cwd")}},
		{Command: &bootstrap.Command{Script: "false"}},
		{Command: &bootstrap.Command{Script: `echo "carried=$CARRIED" >> ` + filepath.Join(out, "runs")}},
	}}
	upload(t, p, plan)
	run(t, p, 1)
	st := status(t, p)
	if st.Phase != PhaseFailed || st.Step != 4 || st.Exit != 1 || !st.Locked || st.Timeout != 60 || st.Started == 0 || st.Now < st.Started {
		t.Errorf("status after a failing step: %+v", st)
	}
	if b, _ := os.ReadFile(target); string(b) != "a\nb\n" {
		t.Errorf("file: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "cwd")); string(b) != "/\n" {
		t.Errorf("commands ran in %q, want /", b)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "runs")); string(b) != "carried=yes\n" {
		t.Errorf("runs: %q (one shell: exports carry over; a failure does not stop the rest)", b)
	}
	for _, staged := range []string{FilesDir, StepsDir} {
		if _, err := os.Stat(p.Path(staged)); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v): staged files hold private keys", staged, err)
		}
	}
	if b, _ := os.ReadFile(p.Path(OutputFile)); !strings.Contains(string(b), "dockyard: step 4") {
		t.Errorf("output: %q", b)
	}

	// Uploading and starting again runs nothing twice.
	upload(t, p, plan)
	run(t, p, 0)
	if b, _ := os.ReadFile(filepath.Join(out, "runs")); string(b) != "carried=yes\n" {
		t.Errorf("the plan ran twice: %q", b)
	}
}

// With Cluster API's success sentinel in the data, the sentinel alone decides: a plan whose
// commands all succeeded but which did not write it failed.
func TestScriptsJudgeBySentinel(t *testing.T) {
	if _, err := os.Stat(SuccessSentinel); err == nil {
		t.Fatalf("%s exists on this machine: the test cannot tell whether the runner judged by it", SuccessSentinel)
	}
	p := Protocol{Dir: t.TempDir()}
	upload(t, p, &bootstrap.Plan{Steps: []bootstrap.Step{{Command: &bootstrap.Command{Script: "true # kubeadm would write " + SuccessSentinel}}}})
	run(t, p, 1)
	if st := status(t, p); st.Phase != PhaseFailed || st.Step != 1 || st.Exit != 1 || st.Missing != SuccessSentinel {
		t.Errorf("status without the sentinel: %+v", st)
	}
}

func unpack(t *testing.T, plan *bootstrap.Plan, timeout time.Duration) map[string][]byte {
	t.Helper()
	archive, err := Archive(plan, timeout)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
}

func upload(t *testing.T, p Protocol, plan *bootstrap.Plan) {
	t.Helper()
	archive, err := Archive(plan, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cmd := p.UploadCommand()
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdin = bytes.NewReader(archive)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("upload: %v: %s", err, out)
	}
}

// run runs the plan as its unit would (the last arguments of StartCommand).
func run(t *testing.T, p Protocol, wantExit int) {
	t.Helper()
	start := p.StartCommand(time.Minute)
	c := exec.Command(start[len(start)-2], start[len(start)-1])
	out, err := c.CombinedOutput()
	if code := c.ProcessState.ExitCode(); code != wantExit {
		t.Fatalf("run.sh exited %d (%v), want %d: %s", code, err, wantExit, out)
	}
}

func status(t *testing.T, p Protocol) Status {
	t.Helper()
	cmd := p.StatusCommand()
	out, err := exec.Command(cmd[0], cmd[1:]...).Output()
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return ParseStatus(string(out))
}
