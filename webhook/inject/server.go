package inject

import (
	"fmt"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
)

// podResourcesSince is the first minor whose API server keeps a pod's
// spec.resources by default: the PodLevelResources gate is beta and on from
// 1.34. 1.30 and 1.31 do not know the field and drop it; 1.32 and 1.33 know
// it behind an alpha gate, off by default, and drop it after the webhooks
// have seen it.
var podResourcesSince = utilversion.MajorMinor(1, 34)

// PodResourcesDropped says whether the API server reporting v drops a pod's
// spec.resources. It reads the version only: a webhook cannot see the
// server's feature gates, so a cluster that turned the gate on before 1.34,
// or off from 1.34, is not told apart. Provider versions such as
// v1.33.5-eks-1234 parse by their leading numbers.
func PodResourcesDropped(v *version.Info) (bool, error) {
	parsed, err := utilversion.ParseGeneric(v.GitVersion)
	if err != nil {
		return false, fmt.Errorf("reading the API server's version %q: %w", v.GitVersion, err)
	}
	return !parsed.AtLeast(podResourcesSince), nil
}
