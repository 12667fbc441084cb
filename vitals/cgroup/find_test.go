package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	podUID = "3f9e1c2a-7b4d-4e8f-9a1b-2c3d4e5f6a7b"
	other  = "00000000-1111-2222-3333-444444444444"
)

// tree makes a cgroup filesystem of version v under a temp dir with the
// given directories in its memory hierarchy, and returns the root.
func tree(t *testing.T, v string, dirs ...string) string {
	t.Helper()
	root := t.TempDir()
	hier := root
	if v == V1 {
		hier = filepath.Join(root, "memory")
		require.NoError(t, os.MkdirAll(hier, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(hier, "memory.usage_in_bytes"), []byte("0\n"), 0o644))
	} else {
		require.NoError(t, os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu io memory pids\n"), 0o644))
	}
	for _, d := range dirs {
		require.NoError(t, os.MkdirAll(filepath.Join(hier, d), 0o755))
	}
	return root
}

func TestDetectVersion(t *testing.T) {
	noMemory := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(noMemory, "cgroup.controllers"), []byte("cpu io pids\n"), 0o644))
	cases := []struct {
		name, root, want, wantErr string
	}{
		{name: "a cgroup2 root with the memory controller is v2", root: "testdata/v2-cgroupfs", want: V2},
		{name: "a root holding a v1 memory hierarchy is v1", root: "testdata/v1-cgroupfs", want: V1},
		{name: "cgroup2 without the memory controller is refused", root: noMemory, wantErr: "has no memory controller"},
		{name: "a directory that is no cgroup mount is refused", root: t.TempDir(), wantErr: "no memory cgroup"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DetectVersion(tc.root)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFindByUID(t *testing.T) {
	u := strings.ReplaceAll(podUID, "-", "_")
	layouts := map[string]string{
		"cgroupfs guaranteed": "/kubepods/pod" + podUID,
		"cgroupfs burstable":  "/kubepods/burstable/pod" + podUID,
		"cgroupfs besteffort": "/kubepods/besteffort/pod" + podUID,
		"systemd guaranteed":  "/kubepods.slice/kubepods-pod" + u + ".slice",
		"systemd burstable":   "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u + ".slice",
		"systemd besteffort":  "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + u + ".slice",
		"kind's nested root":  "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + u + ".slice",
	}
	for _, v := range []string{V1, V2} {
		for layout, rel := range layouts {
			t.Run(v+" "+layout+" pod is found among others", func(t *testing.T) {
				root := tree(t, v, "/kubepods/burstable/pod"+other, rel, rel+"/0123abcd")
				got, err := Find(root, podUID, "", nil)
				require.NoError(t, err)
				assert.Equal(t, Group{Version: v, Root: root, Rel: rel}, got)
			})
		}
	}
}

func TestFind(t *testing.T) {
	self, err := procfs.NewFS("testdata/proc")
	require.NoError(t, err)
	proc, err := self.Proc(4242)
	require.NoError(t, err)
	selfV1, err := proc.Cgroups()
	require.NoError(t, err)
	podRel := "/kubepods/burstable/pod" + podUID

	cases := []struct {
		name    string
		version string
		dirs    []string
		uid     string
		path    func(root string) string
		self    []procfs.Cgroup
		want    string
		wantErr string
	}{
		{name: "a relative cgroup path is read as given", version: V2, dirs: []string{"/test/pod"},
			path: func(string) string { return "test/pod" }, want: "/test/pod"},
		{name: "an absolute cgroup path inside the v1 hierarchy is read as given", version: V1, dirs: []string{"/test/pod"},
			path: func(root string) string { return root + "/memory/test/pod" }, want: "/test/pod"},
		{name: "an absolute cgroup path outside the hierarchy is refused", version: V2,
			path: func(string) string { return "/elsewhere" }, wantErr: "outside the memory hierarchy"},
		{name: "a cgroup path not there yet is not found", version: V2,
			path: func(string) string { return "later" }, wantErr: ErrNotFound.Error()},
		{name: "without a UID the sidecar's own v1 cgroup names the pod", version: V1, dirs: []string{podRel + "/9ab0"},
			self: selfV1, want: podRel},
		{name: "the own cgroup of another pod is not taken for this pod", version: V1, dirs: []string{podRel},
			uid: other, self: selfV1, wantErr: "no cgroup of pod " + other},
		{name: "a private v2 cgroup namespace names no pod", version: V2, dirs: []string{podRel},
			self: []procfs.Cgroup{{HierarchyID: 0, Path: "/"}}, wantErr: "no pod UID given"},
		{name: "a pod deeper than the search goes is not found", version: V2, dirs: []string{"/a/b/c/d/e/pod" + podUID},
			uid: podUID, wantErr: ErrNotFound.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, tc.version, tc.dirs...)
			path := ""
			if tc.path != nil {
				path = tc.path(root)
			}
			got, err := Find(root, tc.uid, path, tc.self)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, Group{Version: tc.version, Root: root, Rel: tc.want}, got)
		})
	}
}

func TestPodUID(t *testing.T) {
	u := strings.ReplaceAll(podUID, "-", "_")
	cases := []struct {
		name, dir, want string
	}{
		{name: "a cgroupfs pod directory names its UID", dir: "pod" + podUID, want: podUID},
		{name: "a systemd pod slice names its UID with underscores", dir: "kubepods-burstable-pod" + u + ".slice", want: podUID},
		{name: "a guaranteed systemd pod slice names its UID", dir: "kubepods-pod" + u + ".slice", want: podUID},
		{name: "a QoS directory is no pod", dir: "burstable"},
		{name: "a container directory is no pod", dir: "4f1c0bd2e3a4b5c6d7e8f90123456789abcdef0123456789abcdef012345678a"},
		{name: "a cgroupfs name with a slice suffix is no pod", dir: "pod" + podUID + ".slice"},
		{name: "a systemd name without the slice suffix is no pod", dir: "kubepods-pod" + u},
		{name: "an upper-case UID is no kubelet's", dir: "pod" + strings.ToUpper(podUID)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PodUID(tc.dir)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzPodUID: a UID read from a directory name is a well-formed UID, and
// both drivers' names of a UID read back as it.
func FuzzPodUID(f *testing.F) {
	f.Add("pod" + podUID)
	f.Add("kubepods-besteffort-pod3f9e1c2a_7b4d_4e8f_9a1b_2c3d4e5f6a7b.slice")
	f.Add("pod-pod-pod.slice")
	f.Fuzz(func(t *testing.T, dir string) {
		uid, ok := PodUID(dir)
		if !ok {
			return
		}
		require.Len(t, uid, 36)
		got, ok := PodUID("pod" + uid)
		require.True(t, ok)
		require.Equal(t, uid, got)
		got, ok = PodUID("kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice")
		require.True(t, ok)
		require.Equal(t, uid, got)
	})
}

func TestContainerID(t *testing.T) {
	const id = "4f1c0bd2e3a4b5c6d7e8f90123456789abcdef0123456789abcdef012345678a"
	cases := []struct {
		name, dir, want string
	}{
		{name: "a cgroupfs container directory is its id", dir: id, want: id},
		{name: "a containerd systemd scope names its id", dir: "cri-containerd-" + id + ".scope", want: id},
		{name: "a CRI-O systemd scope names its id", dir: "crio-" + id + ".scope", want: id},
		{name: "a docker systemd scope names its id", dir: "docker-" + id + ".scope", want: id},
		{name: "CRI-O's monitor scope is no container", dir: "crio-conmon-" + id + ".scope"},
		{name: "a scope without an id is no container", dir: "crio-.scope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ContainerID(tc.dir)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzContainerID: an id is never empty and never holds a path separator
// unless the name did, and a runtime scope of an id reads back as the id.
func FuzzContainerID(f *testing.F) {
	f.Add("cri-containerd-4f1c.scope")
	f.Add("crio-conmon-4f1c.scope")
	f.Add(".scope")
	f.Fuzz(func(t *testing.T, dir string) {
		id, ok := ContainerID(dir)
		if !ok {
			return
		}
		require.NotEmpty(t, id)
		require.Contains(t, dir, id)
		if strings.ContainsAny(id, "-.") || strings.Contains(id, "conmon") {
			return
		}
		got, ok := ContainerID("cri-containerd-" + id + ".scope")
		require.True(t, ok)
		require.Equal(t, id, got)
	})
}
