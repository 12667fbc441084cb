package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/procfs"
)

// Cgroup filesystem versions, as record.Line.Cgroup names them.
const (
	V1 = "v1"
	V2 = "v2"
)

// ErrNotFound means the pod cgroup is not (yet) on the node.
var ErrNotFound = errors.New("pod cgroup not found")

// Group is a found pod cgroup.
type Group struct {
	Version string
	// Root is the mount of the node's cgroup filesystem (--cgroup-root);
	// on v1 the memory hierarchy is Root/memory.
	Root string
	// Rel is the cgroup's path inside the hierarchy, starting with "/".
	Rel string
}

// Hierarchy is the directory the memory controller's tree starts at.
func (g Group) Hierarchy() string {
	if g.Version == V1 {
		return filepath.Join(g.Root, "memory")
	}
	return g.Root
}

// Dir is the cgroup's directory.
func (g Group) Dir() string { return filepath.Join(g.Hierarchy(), g.Rel) }

// DetectVersion tells cgroup v2 from v1 by the files under root, so that a
// test tree is detected like a real mount. A hybrid node (v2 mounted
// without the memory controller next to v1 controllers) is v1 for memory.
func DetectVersion(root string) (string, error) {
	if b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		if !slices.Contains(strings.Fields(string(b)), "memory") {
			return "", fmt.Errorf("cgroup2 at %s has no memory controller", root)
		}
		return V2, nil
	}
	if _, err := os.Stat(filepath.Join(root, "memory", "memory.usage_in_bytes")); err == nil {
		return V1, nil
	}
	return "", fmt.Errorf("no memory cgroup at %s: neither cgroup2 (cgroup.controllers) nor a v1 memory hierarchy (memory/)", root)
}

// Find finds the pod cgroup under root: at path when given (absolute, or
// relative to the memory hierarchy), else from the pod UID at the places
// the kubelet's drivers put it, else from the sidecar's own cgroup (self,
// from /proc/self/cgroup: useful on v1 and without a UID), else by a
// shallow search for the UID.
func Find(root, uid, path string, self []procfs.Cgroup) (Group, error) {
	v, err := DetectVersion(root)
	if err != nil {
		return Group{}, err
	}
	g := Group{Version: v, Root: root}
	hier := g.Hierarchy()
	if path != "" {
		rel := path
		if filepath.IsAbs(path) {
			if rel, err = filepath.Rel(hier, path); err != nil || strings.HasPrefix(rel, "..") {
				return Group{}, fmt.Errorf("cgroup path %s is outside the memory hierarchy %s", path, hier)
			}
		}
		g.Rel = filepath.Join("/", rel)
		if !isDir(g.Dir()) {
			return Group{}, fmt.Errorf("%w: %s", ErrNotFound, g.Dir())
		}
		return g, nil
	}
	for _, rel := range layouts(uid) {
		if g.Rel = rel; isDir(g.Dir()) {
			return g, nil
		}
	}
	if g.Rel = fromSelf(self, v, uid); g.Rel != "" && isDir(g.Dir()) {
		return g, nil
	}
	if uid == "" {
		return Group{}, fmt.Errorf("%w: no pod UID given and the sidecar's own cgroup names no pod", ErrNotFound)
	}
	if g.Rel = search(hier, uid); g.Rel != "" {
		return g, nil
	}
	return Group{}, fmt.Errorf("%w: no cgroup of pod %s under %s", ErrNotFound, uid, hier)
}

// layouts are the pod cgroups the kubelet makes, for each QoS class
// (guaranteed pods sit directly under kubepods), for the cgroupfs and the
// systemd driver.
func layouts(uid string) []string {
	if uid == "" {
		return nil
	}
	u := strings.ReplaceAll(uid, "-", "_")
	return []string{
		"/kubepods/burstable/pod" + uid,
		"/kubepods/besteffort/pod" + uid,
		"/kubepods/pod" + uid,
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u + ".slice",
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + u + ".slice",
		"/kubepods.slice/kubepods-pod" + u + ".slice",
	}
}

// fromSelf finds the pod cgroup in the sidecar's own cgroup path: the
// innermost directory named for the pod. With a private cgroup namespace
// (the v2 default) the path is "/" and names nothing.
func fromSelf(self []procfs.Cgroup, version, uid string) string {
	for _, cg := range self {
		if version == V1 && !slices.Contains(cg.Controllers, "memory") || version == V2 && cg.HierarchyID != 0 {
			continue
		}
		parts := strings.Split(cg.Path, "/")
		for i := len(parts) - 1; i > 0; i-- {
			if got, ok := PodUID(parts[i]); ok && (uid == "" || got == uid) {
				return filepath.Join("/", filepath.Join(parts[:i+1]...))
			}
		}
	}
	return ""
}

// searchDepth bounds search: kubelets with a custom --cgroup-root nest
// kubepods a level or two deeper (kind: /kubelet.slice/kubelet-kubepods.slice).
const searchDepth = 5

// search walks the hierarchy for the pod's directory, skipping files and
// never descending more than searchDepth directories.
func search(hier, uid string) string {
	var found string
	_ = filepath.WalkDir(hier, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(hier, p)
		if got, ok := PodUID(d.Name()); ok && got == uid && rel != "." {
			found = filepath.Join("/", rel)
			return fs.SkipAll
		}
		if rel != "." && strings.Count(rel, string(filepath.Separator)) >= searchDepth-1 {
			return fs.SkipDir
		}
		return nil
	})
	return found
}

var podDir = regexp.MustCompile(`^(?:pod|.*-pod)([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(\.slice)?$`)

// PodUID returns the pod UID a pod cgroup directory is named for:
// "pod<uid>" (cgroupfs) or "kubepods-<qos>-pod<uid with _>.slice" (systemd).
func PodUID(dir string) (string, bool) {
	m := podDir.FindStringSubmatch(dir)
	if m == nil || (m[2] == "") != strings.HasPrefix(dir, "pod") {
		return "", false
	}
	return strings.ReplaceAll(m[1], "_", "-"), true
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
