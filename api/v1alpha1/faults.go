package v1alpha1

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxNetworkDelay is the longest delay NetworkDelayAnnotation may ask for.
const MaxNetworkDelay = 10 * time.Second

// MachineFaults are the faults a DockyardMachine's annotations ask for: the services kept
// stopped (StopAnnotation, each once), the boot delay and the network delay.
// +kubebuilder:object:generate=false
type MachineFaults struct {
	Stop         []string
	BootDelay    time.Duration
	NetworkDelay time.Duration
}

// FaultsOf reads a DockyardMachine's fault annotations, as the webhook checks them and the
// reconciler acts on them: every annotation that cannot be acted on is an error naming it
// (metadata.annotations[...]).
func FaultsOf(annotations map[string]string) (MachineFaults, field.ErrorList) {
	var f MachineFaults
	var errs field.ErrorList
	path := field.NewPath("metadata", "annotations")
	for _, s := range strings.Split(annotations[StopAnnotation], ",") {
		switch s = strings.TrimSpace(s); {
		case s == "" || slices.Contains(f.Stop, s):
		case !slices.Contains(StoppableServices, s):
			errs = append(errs, field.NotSupported(path.Key(StopAnnotation), s, StoppableServices))
		default:
			f.Stop = append(f.Stop, s)
		}
	}
	duration := func(key string, most time.Duration, want string) time.Duration {
		v, ok := annotations[key]
		if !ok {
			return 0
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 || (most > 0 && d > most) {
			errs = append(errs, field.Invalid(path.Key(key), v, want))
			return 0
		}
		return d
	}
	f.BootDelay = duration(BootDelayAnnotation, 0, "a duration such as 45s")
	f.NetworkDelay = duration(NetworkDelayAnnotation, MaxNetworkDelay, "a duration of at most 10s, such as 200ms")
	return f, errs
}
