package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.xml")
	if err := os.WriteFile(path, []byte(`<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4">
  <testsuite name="capie2e" tests="4" time="1000.4">
    <testcase name="[BeforeSuite]" status="passed" time="65.2"></testcase>
    <testcase name="QuickStart | topology" status="passed" time="314"></testcase>
    <testcase name="K8SConformanceSpec" status="skipped" time="12"><skipped message="privileged refused"></skipped></testcase>
    <testcase name="Upgrade" status="failed" time="263.4"><failure message="timed out"></failure></testcase>
  </testsuite>
</testsuites>`), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := summarize(path, &b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| [BeforeSuite] | passed | 1 min 5 s |",
		`| QuickStart \| topology | passed | 5 min 14 s |`,
		"| K8SConformanceSpec | skipped | 12 s |",
		"| Upgrade | failed | 4 min 23 s |",
		"capie2e: 2 passed, 1 failed, 1 skipped; 16 min 40 s in all",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
