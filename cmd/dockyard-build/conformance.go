package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// runConformance builds what Kubernetes' conformance tests need without a registry: e2e.test
// and ginkgo (linked into --dir/bin), the KUBE_TEST_REPO_LIST file naming the images under
// --prefix (--dir/repo-list.yaml), and the images the conformance tests run, listed in
// --dir/images.txt (those --images names; the others e2e.test knows are in
// --dir/images-not-built.txt), and the image
// Cluster API's conformance specs run them from (--runner-image).
func runConformance(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("conformance", flag.ExitOnError)
	common := addImageFlags(fs)
	k8sVersion := fs.String("kubernetes-version", imagebuild.DefaultKubernetesVersion, "Kubernetes version of e2e.test")
	prefix := fs.String("prefix", imagebuild.DefaultConformancePrefix, "registry prefix the images are named under")
	dir := fs.String("dir", "", "directory for bin/e2e.test, bin/ginkgo, repo-list.yaml and images.txt (required)")
	only := fs.String("images", "", "build only these of the images e2e.test runs, by name below --prefix (comma-separated, e.g. agnhost,busybox; default all)")
	runner := fs.String("runner-image", "", "name of the image Cluster API's kubetest runs (default "+imagebuild.ConformanceRunnerRepository+":<kubernetes-version>; \"none\" builds none)")
	_ = fs.Parse(args)
	if *dir == "" {
		return errors.New("--dir is required")
	}
	b, done, err := common.builder()
	if err != nil {
		return err
	}
	defer done()

	k8sBin, ginkgoBin, err := buildConformanceBinaries(ctx, filepath.Join(*common.cache, "build"), *k8sVersion)
	if err != nil {
		return err
	}
	binDir, err := linkConformanceBinaries(*dir, k8sBin, ginkgoBin)
	if err != nil {
		return err
	}
	repoList := filepath.Join(*dir, "repo-list.yaml")
	if err := os.WriteFile(repoList, imagebuild.ConformanceRepoList(*prefix), 0o644); err != nil {
		return errors.Wrap(err, "writing the repository list")
	}

	images, others, err := listConformanceImages(ctx, filepath.Join(binDir, gobuild.E2ETest), repoList, *prefix, *only)
	if err != nil {
		return err
	}
	if err := b.ConformanceImages(ctx, *k8sVersion, images); err != nil {
		return err
	}
	if *runner == "" {
		*runner = imagebuild.ConformanceRunnerRepository + ":" + *k8sVersion
	}
	if *runner != "none" {
		if err := b.ConformanceRunnerImage(ctx, *k8sVersion, *runner, filepath.Join(k8sBin, gobuild.E2ETest), filepath.Join(ginkgoBin, "ginkgo"), *prefix); err != nil {
			return errors.Wrapf(err, "image %s", *runner)
		}
	}
	return writeConformanceLists(*dir, images, others)
}

// buildConformanceBinaries builds e2e.test of a Kubernetes version and the ginkgo it requires,
// and returns the directories holding them.
func buildConformanceBinaries(ctx context.Context, cacheDir, k8sVersion string) (k8sBin, ginkgoBin string, err error) {
	gb := &gobuild.Builder{CacheDir: cacheDir, Log: os.Stderr}
	k8s, err := gobuild.KubernetesTest(k8sVersion)
	if err != nil {
		return "", "", err
	}
	k8sBin, err = gb.Run(ctx, k8s)
	if err != nil {
		return "", "", err
	}
	ginkgoVersion, err := gb.RequiredVersion(ctx, "k8s.io/kubernetes", k8sVersion, gobuild.GinkgoModule)
	if err != nil {
		return "", "", err
	}
	ginkgo, err := gobuild.Ginkgo(ginkgoVersion)
	if err != nil {
		return "", "", err
	}
	ginkgoBin, err = gb.Run(ctx, ginkgo)
	if err != nil {
		return "", "", err
	}
	return k8sBin, ginkgoBin, nil
}

// linkConformanceBinaries links e2e.test and ginkgo into dir's bin directory, whose path it
// returns.
func linkConformanceBinaries(dir, k8sBin, ginkgoBin string) (string, error) {
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", errors.Wrapf(err, "creating %s", binDir)
	}
	for name, target := range map[string]string{
		gobuild.E2ETest: filepath.Join(k8sBin, gobuild.E2ETest),
		"ginkgo":        filepath.Join(ginkgoBin, "ginkgo"),
	} {
		link := filepath.Join(binDir, name)
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return "", errors.Wrapf(err, "linking %s", link)
		}
	}
	return binDir, nil
}

// listConformanceImages returns the images e2e.test lists under the prefix that are to be
// built (those only names, when it names some), and the sorted names of the others.
func listConformanceImages(ctx context.Context, e2eTest, repoList, prefix, only string) ([]imagebuild.ConformanceImage, []string, error) {
	list := exec.CommandContext(ctx, e2eTest, "--list-images")
	list.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList)
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		return nil, nil, errors.Errorf("e2e.test --list-images: %v: %s", err, stderr.String())
	}
	images, others := imagebuild.SelectConformanceImages(string(out), prefix)
	if len(images) == 0 {
		return nil, nil, errors.Errorf("e2e.test --list-images named no image under %s that dockyard-build can build:\n%s", prefix, out)
	}
	var names []string
	if only != "" {
		names = strings.Split(only, ",")
	}
	kept, err := imagebuild.OnlyConformanceImages(images, names)
	if err != nil {
		return nil, nil, errors.Wrap(err, "--images")
	}
	for _, img := range images {
		if !slices.Contains(kept, img) {
			others = append(others, img.Ref)
		}
	}
	slices.Sort(others)
	return kept, others, nil
}

// writeConformanceLists writes the names of the images built to dir's images.txt, and of the
// others to images-not-built.txt, and prints the former.
func writeConformanceLists(dir string, images []imagebuild.ConformanceImage, others []string) error {
	var refs []string
	for _, img := range images {
		refs = append(refs, img.Ref)
	}
	for file, lines := range map[string][]string{"images.txt": refs, "images-not-built.txt": others} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			return errors.Wrapf(err, "writing %s", file)
		}
	}
	for _, r := range refs {
		fmt.Println(r)
	}
	return nil
}
