package kubernetes

import (
	"context"
	"strings"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// volumeObject is the name of the ConfigMap recording a volume.
func volumeObject(name string) string { return "volume-" + name }

// CreateVolume records a named volume; its data lives in the Pod that mounts it. A ConfigMap of
// its name not the owner's is said so.
func (r *Runtime) CreateVolume(ctx context.Context, spec container.VolumeSpec) error {
	if err := validName("volume", volumeObject(spec.Name)); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: volumeObject(spec.Name), Namespace: r.namespace, Labels: objectLabels("volume", spec.Labels), Annotations: annotated(spec.Labels),
	}}
	r.own(cm.Labels, cm.Annotations)
	if err := r.claim(ctx); err != nil {
		return errors.Wrapf(err, "creating volume %s", spec.Name)
	}
	_, err := r.client.CoreV1().ConfigMaps(r.namespace).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if _, err := r.ownVolume(ctx, spec.Name); container.IsNotFound(err) {
			return errors.Wrapf(r.notTheOwners("ConfigMap", cm.Name), "creating volume %s", spec.Name)
		}
		return nil
	}
	return errors.Wrapf(err, "creating volume %s", spec.Name)
}

// ownVolume reads the ConfigMap of a volume of the owner's; ErrNotFound when there is none.
func (r *Runtime) ownVolume(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	o, err := r.owned(ctx, "ConfigMap", volumeObject(name), func() (metav1.Object, error) {
		return r.client.CoreV1().ConfigMaps(r.namespace).Get(ctx, volumeObject(name), metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return o.(*corev1.ConfigMap), nil
}

// ListVolumes returns the owner's volumes carrying the labels.
func (r *Runtime) ListVolumes(ctx context.Context, want map[string]string) ([]container.Volume, error) {
	cms, err := r.ownedList(ctx, func() ([]metav1.Object, error) {
		l, err := r.client.CoreV1().ConfigMaps(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector("volume", want)})
		if err != nil {
			return nil, err
		}
		return objects(l.Items), nil
	})
	if err != nil {
		return nil, errors.Wrap(err, "listing Dockyard's volumes")
	}
	var out []container.Volume
	for _, cm := range cms {
		if l := labelsOf(cm); container.MatchLabels(l, want) && strings.HasPrefix(cm.GetName(), volumeObject("")) {
			out = append(out, container.Volume{Name: strings.TrimPrefix(cm.GetName(), volumeObject("")), Labels: l})
		}
	}
	return out, nil
}

// RemoveVolume removes a volume none of the owner's Pods mounts; removing one that does not
// exist, or is not the owner's, is not an error (and leaves it).
func (r *Runtime) RemoveVolume(ctx context.Context, name string) error {
	users, err := r.ownPods(ctx, volumeLabel(name))
	if err != nil {
		return errors.Wrapf(err, "listing the Pods of volume %s", name)
	}
	if len(users) > 0 {
		return errors.Errorf("volume %s is in use by Pod %s", name, users[0].Name)
	}
	cm, err := r.ownVolume(ctx, name)
	if container.IsNotFound(err) {
		return nil
	}
	if err == nil {
		err = r.client.CoreV1().ConfigMaps(r.namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: sameObject(cm)})
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return errors.Wrapf(err, "removing volume %s", name)
	}
	return errors.Wrapf(r.releaseClaim(ctx), "removing volume %s", name)
}
