package imagebuild

import (
	"context"
	"time"
)

// CNIImage builds localhost/dockyard/flannel:<version> into the engine and returns its name.
// The node image preloads the same image; this puts it into the engine as well, for engines'
// image loading into nodes of other images and for inspection.
func (b *Builder) CNIImage(ctx context.Context, flannelVersion string) (string, error) {
	if flannelVersion == "" {
		flannelVersion = DefaultFlannelVersion
	}
	ref := FlannelImageName(flannelVersion)
	hash, err := b.flannelInputs(ctx, flannelVersion)
	if err != nil {
		return "", err
	}
	if name, err := b.existing(ctx, hash, ref); err != nil || name != "" {
		return name, err
	}
	unlock, err := b.lock(ctx, "flannel-"+flannelVersion)
	if err != nil {
		return "", err
	}
	defer unlock()
	start := time.Now()
	base, err := b.Rootfs(ctx, iptablesRootfs())
	if err != nil {
		return "", err
	}
	img, err := b.flannelImage(ctx, flannelVersion, base)
	if err != nil {
		return "", err
	}
	if err := b.load(ctx, ref, img.Image); err != nil {
		return "", err
	}
	b.logf("built %s in %s (%d MiB compressed)", ref, time.Since(start).Round(time.Second), imageSize(img.Image)>>20)
	return ref, nil
}

// flannelInputs is the inputs hash of the flannel image, labelled on it wherever it is (engine
// or node), so both copies are the same image.
func (b *Builder) flannelInputs(ctx context.Context, flannelVersion string) (string, error) {
	in, err := b.baseInputs(ctx, "cni", "iptables", "rootfs")
	if err != nil {
		return "", err
	}
	in.Set("image", "flannel")
	in.Set("flannel", flannelVersion)
	in.Set("suite", b.suite())
	in.Set("mirror", b.mirror())
	if err := in.SetJSON("rootfs", iptablesRootfs()); err != nil {
		return "", err
	}
	return in.Hash(), nil
}
