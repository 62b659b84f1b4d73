package kubernetes

import (
	"context"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// volumeObject is the name of the ConfigMap recording a volume.
func volumeObject(name string) string { return "volume-" + name }

// CreateVolume records a named volume; its data lives in the Pod that mounts it.
func (r *Runtime) CreateVolume(ctx context.Context, spec container.VolumeSpec) error {
	if err := validName("volume", volumeObject(spec.Name)); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: volumeObject(spec.Name), Namespace: r.namespace, Labels: objectLabels("volume", spec.Labels), Annotations: annotated(spec.Labels),
	}}
	_, err := r.client.CoreV1().ConfigMaps(r.namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "creating volume %s", spec.Name)
	}
	return nil
}

// ListVolumes returns the volumes carrying the labels.
func (r *Runtime) ListVolumes(ctx context.Context, want map[string]string) ([]container.Volume, error) {
	cms, err := r.client.CoreV1().ConfigMaps(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector("volume", want)})
	if err != nil {
		return nil, errors.Wrap(err, "listing Dockyard's volumes")
	}
	var out []container.Volume
	for _, cm := range cms.Items {
		if l := exactLabels(cm.Annotations); container.MatchLabels(l, want) {
			out = append(out, container.Volume{Name: cm.Name[len("volume-"):], Labels: l})
		}
	}
	return out, nil
}

// RemoveVolume removes a volume no Pod mounts; removing one that does not exist is not an
// error.
func (r *Runtime) RemoveVolume(ctx context.Context, name string) error {
	users, err := r.client.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: volumeLabel(name)})
	if err != nil {
		return errors.Wrapf(err, "listing the Pods of volume %s", name)
	}
	if len(users.Items) > 0 {
		return errors.Errorf("volume %s is in use by Pod %s", name, users.Items[0].Name)
	}
	err = r.client.CoreV1().ConfigMaps(r.namespace).Delete(ctx, volumeObject(name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return errors.Wrapf(err, "removing volume %s", name)
	}
	return nil
}
