package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
)

func loadCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "load", Short: "Load images from the host's engine into a cluster's nodes"}
	cmd.AddCommand(loadImageCommand(g))
	return cmd
}

func loadImageCommand(g *globals) *cobra.Command {
	var cluster, namespace, machine string
	cmd := &cobra.Command{
		Use:   "image IMAGE...",
		Short: "Load images from the host's engine into every node of a cluster, now and when nodes join",
		Long: `Load images from the container engine into the containerd of every node of a cluster, so pods
use them without a registry (imagePullPolicy IfNotPresent or Never). The images are added to the
DockyardCluster's spec.loadImages once the nodes hold them: nodes that join later (scale-up,
remediation, rollouts, MachinePool instances) get them too, and a node already holding the
engine's image of a name is skipped. Load again after rebuilding an image: every node gets the new one.

--machine loads into one machine's node only, and records nothing.`,
		Example: `  docker build -t app:dev . && dockyard load image app:dev --cluster dev
  dockyard load image app:dev sidecar:dev --cluster team-a/dev`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, images []string) error {
			ref, err := parseClusterRef(cluster, namespace)
			if err != nil {
				return err
			}
			return loadImages(cmd.Context(), g, ref, machine, images)
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "dockyard", "the cluster, NAME or NAMESPACE/NAME")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the cluster's namespace, when --cluster names none")
	cmd.Flags().StringVar(&machine, "machine", "", "load into this DockyardMachine's node only")
	return cmd
}

func loadImages(ctx context.Context, g *globals, ref clusterRef, machine string, images []string) error {
	nodes, done, err := g.clusterNodes(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	for _, img := range images {
		ok, err := nodes.ImageExists(ctx, img)
		if err != nil {
			return err
		}
		if !ok {
			return errors.Errorf("image %s is not on the %s engine: build or pull it there first", img, g.runtime.Name)
		}
	}

	var (
		targets []*docker.Node
		m       *managementCluster
	)
	if machine != "" {
		node, err := nodes.FindNode(ctx, ref.key(), machine)
		if err != nil {
			return err
		}
		if node == nil {
			return errors.Errorf("machine %s of cluster %s has no node container", machine, ref)
		}
		targets = []*docker.Node{node}
	} else {
		if m, err = g.management(ctx); err != nil {
			return err
		}
		// Checked before anything is copied: the management cluster refuses an image the
		// cluster's namespace may not load, naming the field.
		if err := recordImages(ctx, m.client, ref, images, true); err != nil {
			return err
		}
		if targets, err = nodes.Nodes(ctx, ref.key(), ""); err != nil {
			return err
		}
	}

	start, copies := time.Now(), 0
	report := func(l docker.ImageLoad) {
		state := "copying"
		if l.Done {
			state, copies = "loaded", copies+1
		}
		say("%s %s into %s: %d MiB in %s", state, l.Image, l.Node, l.Bytes>>20, l.Took.Round(100*time.Millisecond))
	}
	for _, node := range targets {
		if !node.Running {
			say("skipping node %s: it is %s (Dockyard loads the images when it provisions a node)", node.Name, node.State)
			continue
		}
		if err := node.LoadImages(ctx, images, report); err != nil {
			return err
		}
	}
	say("%d images into %d nodes in %s: %d copied, the rest were there already",
		len(images), len(targets), time.Since(start).Round(100*time.Millisecond), copies)
	if m == nil {
		return nil
	}
	// Recorded once the nodes hold the images, so Dockyard gives them to every node that joins
	// from now on, and finds them in the nodes loaded above instead of copying them a second
	// time while this command does.
	return recordImages(ctx, m.client, ref, images, false)
}

// recordImages adds images to the cluster's spec.loadImages; with dryRun, it only asks the
// management cluster whether it accepts them.
func recordImages(ctx context.Context, c client.Client, ref clusterRef, images []string, dryRun bool) error {
	var opts []client.PatchOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	dc := &infrav1.DockyardCluster{}
	// The list is read again when the cluster changed meanwhile (its controller writes its status).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, ref.objectKey(), dc); err != nil {
			return errors.Wrapf(err, "reading the DockyardCluster of cluster %s (dockyard get clusters lists them)", ref)
		}
		original := dc.DeepCopy()
		for _, img := range images {
			if !slices.Contains(dc.Spec.LoadImages, img) {
				dc.Spec.LoadImages = append(dc.Spec.LoadImages, img)
			}
		}
		if len(dc.Spec.LoadImages) == len(original.Spec.LoadImages) {
			return nil
		}
		return c.Patch(ctx, dc, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}), opts...)
	})
	if err != nil {
		return errors.Wrapf(err, "adding the images to spec.loadImages of DockyardCluster %s", ref)
	}
	if dryRun {
		return nil
	}
	fmt.Printf("spec.loadImages of DockyardCluster %s: %v\n", ref, dc.Spec.LoadImages)
	return nil
}
