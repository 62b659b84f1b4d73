package inmemory

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/gob"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/workloadapi"
)

// StateStore keeps the state of the engine's groups outside the process, one record per group
// (the value of the engine's group label: a cluster), so that the engine of a manager started
// again, or of the manager a cluster moved to, serves the cluster as it was.
type StateStore interface {
	// Save writes a group's record and says so; a group whose owner is gone (or going) is not
	// an error: nothing is written, and saved is false. With anew, the group is not the one the
	// engine last saved under its name (it was made, or made again after one of that name
	// ended), so a record there may be another owner's: it is made afresh, for the group's
	// current owner.
	Save(ctx context.Context, group string, state []byte, anew bool) (saved bool, err error)
	// Load reads a group's record; nil and no error when there is none.
	Load(ctx context.Context, group string) ([]byte, error)
	// Groups names the groups that have a record.
	Groups(ctx context.Context) ([]string, error)
	// Delete removes a group's record; one that is not there is not an error.
	Delete(ctx context.Context, group string) error
}

// DefaultSyncInterval is how often an engine with a StateStore saves the groups that changed
// and takes in or lets go of the groups whose records came or went.
const DefaultSyncInterval = 10 * time.Second

// groupState is one group's record: its containers, networks and volumes, its front and the
// cluster its front serves.
type groupState struct {
	Group   GroupState
	Fronts  []frontState
	Cluster *workloadapi.ClusterState
}

// frontState is a front and the port it listens on.
type frontState struct {
	Spec container.FrontSpec
	Port int
}

// persistence is what an engine with a StateStore keeps to save only what changed.
type persistence struct {
	store    StateStore
	label    string
	interval time.Duration
	// changes counts the changes of each group; saved is the count and the cluster's
	// resourceVersion at the last save; over are the groups whose cluster ended (its front
	// removed) and whose records are an ended cluster's until deleted or made anew.
	changes map[string]uint64
	saved   map[string]savedAt
	over    map[string]bool
	// settled are the groups whose first create takeIn let through: held, taken in from their
	// records, or new.
	settled map[string]bool
	stop    chan struct{}
}

type savedAt struct {
	changes uint64
	version string
}

// touch counts a change of what carries labels (Runtime.OnChange, with the runtime locked).
func (e *Engine) touch(labels map[string]string) {
	if e.persist == nil {
		return
	}
	if group := labels[e.persist.label]; group != "" {
		e.stateMu.Lock()
		e.persist.changes[group]++
		e.stateMu.Unlock()
	}
}

// ended marks the group of what carries labels as ended (its front removed): its record is
// deleted at the next sync, or made anew if a group of that name is there again by then.
func (e *Engine) ended(labels map[string]string) {
	if e.persist == nil {
		return
	}
	if group := labels[e.persist.label]; group != "" {
		e.stateMu.Lock()
		e.persist.over[group] = true
		delete(e.persist.saved, group)
		delete(e.persist.settled, group)
		e.stateMu.Unlock()
	}
}

// Sync saves the groups that changed since they were last saved, deletes the records of groups
// that are gone, takes in the groups whose records it does not hold (a cluster moved here),
// and lets go of those whose records were deleted (a cluster moved away, or deleted with its
// owner). Without a StateStore it does nothing.
func (e *Engine) Sync(ctx context.Context) error {
	if e.persist == nil {
		return nil
	}
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	var errs []error
	stored, err := e.persist.store.Groups(ctx)
	if err != nil {
		return errors.Wrap(err, "listing the in-memory clusters' records")
	}
	held := e.groups()
	for group := range held {
		if !slices.Contains(stored, group) && e.wasSaved(group) {
			e.forget(group)
			continue
		}
		errs = append(errs, e.save(ctx, group))
	}
	e.stateMu.Lock()
	var gone []string
	for group := range e.persist.saved {
		gone = append(gone, group)
	}
	for group := range e.persist.over {
		gone = append(gone, group)
	}
	e.stateMu.Unlock()
	for _, group := range gone {
		if held[group] {
			continue
		}
		// Everything of the group was removed: so is its record.
		if err := e.persist.store.Delete(ctx, group); err != nil {
			errs = append(errs, err)
			continue
		}
		e.stateMu.Lock()
		delete(e.persist.saved, group)
		delete(e.persist.over, group)
		delete(e.persist.changes, group)
		e.stateMu.Unlock()
	}
	for _, group := range stored {
		if !held[group] && !e.wasSaved(group) && !e.isOver(group) {
			errs = append(errs, e.restore(ctx, group))
		}
	}
	return kerrors.NewAggregate(errs)
}

// save writes a group's record when it changed since the last save.
func (e *Engine) save(ctx context.Context, group string) error {
	e.stateMu.Lock()
	changes := e.persist.changes[group]
	last, saved := e.persist.saved[group]
	e.stateMu.Unlock()
	version := ""
	if f := e.frontOf(group); f != nil {
		version = versionOf(f.cluster)
	}
	if saved && last.changes == changes && last.version == version {
		return nil
	}
	data, err := e.groupRecord(group)
	if err != nil {
		return err
	}
	written, err := e.persist.store.Save(ctx, group, data, !saved)
	if err != nil {
		return errors.Wrapf(err, "saving in-memory cluster %s", group)
	}
	if !written {
		// Not saved, so never let go for want of a record: its owner is going, and so are its
		// containers.
		return nil
	}
	e.stateMu.Lock()
	e.persist.saved[group] = savedAt{changes: changes, version: version}
	delete(e.persist.over, group)
	e.stateMu.Unlock()
	return nil
}

// groupRecord encodes a group: gzip of gob.
func (e *Engine) groupRecord(group string) ([]byte, error) {
	st := groupState{Group: e.groupState(e.persist.label, group)}
	e.mu.Lock()
	for _, f := range e.fronts {
		if f.spec.Labels[e.persist.label] != group {
			continue
		}
		st.Fronts = append(st.Fronts, frontState{Spec: f.spec, Port: f.listener.Addr().(*net.TCPAddr).Port})
		if f.cluster != nil {
			cs, err := f.cluster.State()
			if err != nil {
				e.mu.Unlock()
				return nil, errors.Wrapf(err, "in-memory cluster %s", group)
			}
			st.Cluster = cs
		}
	}
	e.mu.Unlock()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := gob.NewEncoder(zw).Encode(&st); err != nil {
		return nil, errors.Wrapf(err, "encoding in-memory cluster %s", group)
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// restore takes in a group the engine does not hold from its record: its containers, networks
// and volumes, its front listening on the port it had, and its cluster serving there. A group
// without a record is not an error; one whose names are taken fails, changing nothing.
func (e *Engine) restore(ctx context.Context, group string) error {
	data, err := e.persist.store.Load(ctx, group)
	if err != nil || data == nil {
		return errors.Wrapf(err, "reading in-memory cluster %s", group)
	}
	var st groupState
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err == nil {
		err = gob.NewDecoder(zr).Decode(&st)
	}
	if err != nil {
		return errors.Wrapf(err, "decoding in-memory cluster %s", group)
	}
	var cluster *workloadapi.Cluster
	if st.Cluster != nil {
		if cluster, err = workloadapi.RestoreCluster(st.Cluster); err != nil {
			return errors.Wrapf(err, "in-memory cluster %s", group)
		}
	}
	fronts := make([]*front, 0, len(st.Fronts))
	undo := func() {
		for _, f := range fronts {
			_ = f.listener.Close()
		}
		if cluster != nil {
			_ = cluster.Close()
		}
	}
	for _, fs := range st.Fronts {
		l, err := net.Listen("tcp", net.JoinHostPort(e.address, strconv.Itoa(fs.Port)))
		if err != nil {
			undo()
			return errors.Wrapf(err, "in-memory cluster %s: its endpoint's port %d", group, fs.Port)
		}
		fronts = append(fronts, &front{spec: fs.Spec, listener: l, served: workloadapi.NewListener(l.Addr()), cluster: cluster})
	}
	if err := e.restoreGroup(st.Group); err != nil {
		undo()
		return errors.Wrapf(err, "in-memory cluster %s", group)
	}
	e.mu.Lock()
	for _, f := range fronts {
		e.fronts[f.spec.Name] = f
		go e.accept(f)
		if f.cluster != nil {
			go func(f *front) { _ = f.cluster.Serve(f.served) }(f)
		}
	}
	e.mu.Unlock()
	e.stateMu.Lock()
	e.persist.saved[group] = savedAt{changes: e.persist.changes[group], version: versionOf(cluster)}
	e.stateMu.Unlock()
	return nil
}

// forget drops a group whose record was deleted: its fronts stop, its cluster's API with them.
func (e *Engine) forget(group string) {
	e.mu.Lock()
	var gone []string
	for name, f := range e.fronts {
		if f.spec.Labels[e.persist.label] == group {
			gone = append(gone, name)
		}
	}
	e.mu.Unlock()
	for _, name := range gone {
		// Not ended: the cluster goes on elsewhere (or was never this engine's to end).
		if f := e.dropFront(name); f != nil {
			_ = e.stopFront(f)
		}
	}
	for _, name := range e.forgetGroup(e.persist.label, group) {
		e.Nodes.forget(name)
	}
	e.stateMu.Lock()
	delete(e.persist.saved, group)
	delete(e.persist.changes, group)
	delete(e.persist.settled, group)
	e.stateMu.Unlock()
}

// takeIn runs before the engine makes anything of a group (what carries labels), the first
// time: a group that has a record the engine does not hold is taken in from it at once, not at
// the next sync. A cluster moved to a running manager is reconciled there before that sync,
// while the manager it came from may still serve it; made anew instead, its front would listen
// on another port than the endpoint its DockyardCluster keeps, and stand in the way of its
// record for good. It fails while the record cannot be taken in (its port still taken), so the
// caller tries again later; a group the engine holds, ended or has no record of is let through.
func (e *Engine) takeIn(ctx context.Context, labels map[string]string) error {
	if e.persist == nil {
		return nil
	}
	group := labels[e.persist.label]
	if group == "" {
		return nil
	}
	e.stateMu.Lock()
	settled := e.persist.settled[group]
	e.stateMu.Unlock()
	if settled {
		return nil
	}
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	if !e.groups()[group] && !e.wasSaved(group) && !e.isOver(group) {
		if err := e.restore(ctx, group); err != nil {
			return errors.Wrap(err, "taking in the record of a cluster moved here")
		}
	}
	e.stateMu.Lock()
	e.persist.settled[group] = true
	e.stateMu.Unlock()
	return nil
}

// groups are the groups the engine holds something of.
func (e *Engine) groups() map[string]bool {
	held := e.labelValues(e.persist.label)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.fronts {
		if g := f.spec.Labels[e.persist.label]; g != "" {
			held[g] = true
		}
	}
	return held
}

func (e *Engine) frontOf(group string) *front {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.fronts {
		if f.spec.Labels[e.persist.label] == group {
			return f
		}
	}
	return nil
}

func (e *Engine) wasSaved(group string) bool {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	_, ok := e.persist.saved[group]
	return ok
}

func (e *Engine) isOver(group string) bool {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	return e.persist.over[group]
}

func versionOf(c *workloadapi.Cluster) string {
	if c == nil {
		return ""
	}
	return c.Store.ResourceVersion()
}

// syncLoop runs Sync every interval until the engine is closed.
func (e *Engine) syncLoop() {
	t := time.NewTicker(e.persist.interval)
	defer t.Stop()
	for {
		select {
		case <-e.persist.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), e.persist.interval*3)
			if err := e.Sync(ctx); err != nil && e.onSyncError != nil {
				e.onSyncError(err)
			}
			cancel()
		}
	}
}
