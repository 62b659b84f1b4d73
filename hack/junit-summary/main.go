// Command junit-summary prints a ginkgo JUnit report as the Markdown rows docs/testing.md quotes:
// each spec with its result and wall time, in the order they ran, then the counts and the total.
//
//	go run ./hack/junit-summary REPORT.xml
package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pkg/errors"
)

type report struct {
	Suites []struct {
		Name  string     `xml:"name,attr"`
		Time  float64    `xml:"time,attr"`
		Cases []testcase `xml:"testcase"`
	} `xml:"testsuite"`
}

type testcase struct {
	Name    string    `xml:"name,attr"`
	Status  string    `xml:"status,attr"`
	Time    float64   `xml:"time,attr"`
	Skipped *struct{} `xml:"skipped"`
	Failure *struct{} `xml:"failure"`
	Error   *struct{} `xml:"error"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/junit-summary REPORT.xml")
		os.Exit(2)
	}
	if err := summarize(os.Args[1], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "junit-summary:", err)
		os.Exit(1)
	}
}

func summarize(path string, w io.Writer) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return errors.Wrap(err, "reading the JUnit report")
	}
	var r report
	if err := xml.Unmarshal(raw, &r); err != nil {
		return errors.Wrapf(err, "parsing %s", path)
	}
	counts := map[string]int{}
	fmt.Fprintln(w, "| spec | result | time |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, s := range r.Suites {
		for _, c := range s.Cases {
			result := result(c)
			counts[result]++
			fmt.Fprintf(w, "| %s | %s | %s |\n", strings.ReplaceAll(c.Name, "|", `\|`), result, duration(c.Time))
		}
		fmt.Fprintf(w, "\n%s: %d passed, %d failed, %d skipped; %s in all\n", s.Name,
			counts["passed"], counts["failed"], counts["skipped"], duration(s.Time))
	}
	return nil
}

func result(c testcase) string {
	switch {
	case c.Failure != nil || c.Error != nil:
		return "failed"
	case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
		return "skipped"
	}
	return "passed"
}

func duration(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second)).Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
}
