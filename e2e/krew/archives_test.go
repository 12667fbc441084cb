//go:build krew

package krew

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	tag         = "v9.8.7"
	releaseURIs = "https://github.com/runnerguard/runnerguard/releases/download/"
	checksums   = "kubectl-runnerguard_checksums.txt"
)

// The release's archives are exactly what the template points krew at, each
// with the checksum the manifest will carry, holding a kubectl-runnerguard
// for its selector's platform; the one for this machine runs, stamped with
// the release's version, under kubectl as a plugin; two builds of one
// commit are the same bytes.
//
// KREW_PLATFORMS ("linux_amd64 ...") builds only those platforms, as
// `make test` does for this machine's; the other entries of the template
// are then checked for their shape only. The release workflow runs it for
// every platform before it publishes.
func TestArchivesMatchTemplate(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	only := strings.Fields(os.Getenv("KREW_PLATFORMS"))
	dir, again := t.TempDir(), t.TempDir()
	build(t, root, dir, only)

	p := render(t, filepath.Join(root, "hack", "krew", "runnerguard.yaml"), tag, dir, len(only) > 0)
	assert.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", p.APIVersion)
	assert.Equal(t, "Plugin", p.Kind)
	assert.Equal(t, "runnerguard", p.Metadata.Name)
	assert.Equal(t, tag, p.Spec.Version)
	assert.NotEmpty(t, p.Spec.ShortDescription)

	sums := readChecksums(t, filepath.Join(dir, checksums))
	var uris, built []string
	for name := range sums {
		built = append(built, name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	contents := []string{"kubectl-runnerguard", "kubectl_complete-runnerguard"}
	if _, err := os.Stat(filepath.Join(root, "LICENSE")); err == nil {
		contents = append(contents, "LICENSE")
	}
	host := ""
	for _, pl := range p.Spec.Platforms {
		name := strings.TrimPrefix(pl.URI, releaseURIs+tag+"/")
		require.NotEqual(t, pl.URI, name, "the URI is not an asset of the release %s", tag)
		uris = append(uris, name)
		goos, goarch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		assert.Equal(t, "kubectl-runnerguard_"+goos+"_"+goarch+".tar.gz", name, "the selector's platform and the URI's differ")
		assert.Equal(t, "kubectl-runnerguard", pl.Bin)
		if len(only) > 0 && !slices.Contains(only, goos+"_"+goarch) {
			assert.Equal(t, notBuilt, pl.SHA256, "%s was built though KREW_PLATFORMS leaves it out", name)
			continue
		}
		assert.Equal(t, sums[name], pl.SHA256, "%s: the manifest's sha256 and the checksums file's differ", name)
		exe := unpack(t, filepath.Join(dir, name), pl.Bin, contents)
		assertPlatform(t, exe, goos, goarch)
		if goos == runtime.GOOS && goarch == runtime.GOARCH {
			host = exe
		}
	}
	if len(only) > 0 {
		uris = nil
		for _, platform := range only {
			uris = append(uris, "kubectl-runnerguard_"+platform+".tar.gz")
		}
	}
	slices.Sort(uris)
	slices.Sort(built)
	assert.Equal(t, uris, built, "the template's archives and the build's differ")
	assert.ElementsMatch(t, append(slices.Clone(uris), checksums), files, "the build wrote other files")

	build(t, root, again, only)
	for _, name := range files {
		a, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(again, name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(a, b), "%s differs between two builds of one commit", name)
	}

	if host == "" {
		t.Skipf("the template has no archive for this machine's %s/%s to run", runtime.GOOS, runtime.GOARCH)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	out, err := exec.Command(host, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "runnerguard "+strings.TrimPrefix(tag, "v")+" (commit "+strings.TrimSpace(string(head)))
	if kubectl := os.Getenv("KUBECTL"); kubectl == "" {
		t.Log("$KUBECTL is not set: not run through kubectl (make krew-test sets it)")
	} else {
		cmd := exec.Command(kubectl, "runnerguard", "version")
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(host)+string(os.PathListSeparator)+os.Getenv("PATH"))
		viaKubectl, err := cmd.CombinedOutput()
		require.NoError(t, err, "kubectl runnerguard version: %s", viaKubectl)
		assert.Equal(t, string(out), string(viaKubectl))
	}
}

// build runs the release's archive builder into dir, for the platforms
// only names or, when it names none, for every one.
func build(t *testing.T, root, dir string, only []string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "plugin.sh"), dir)
	cmd.Env = append(os.Environ(), "VERSION="+strings.TrimPrefix(tag, "v"), "PLUGIN_PLATFORMS="+strings.Join(only, " "))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/plugin.sh: %s", out)
}

// readChecksums reads a sha256sum file and checks each line against the
// file it names.
func readChecksums(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	sums := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		sum, name, ok := strings.Cut(s.Text(), "  ")
		require.True(t, ok, "not a sha256sum line: %q", s.Text())
		b, err := os.ReadFile(filepath.Join(filepath.Dir(file), name))
		require.NoError(t, err)
		got := sha256.Sum256(b)
		assert.Equal(t, hex.EncodeToString(got[:]), sum, "%s's checksum", name)
		sums[name] = sum
	}
	require.NoError(t, s.Err())
	return sums
}

// unpack checks the archive holds exactly the files want, regular and owned
// by root, bin among them and executable; it extracts bin and returns its
// path.
func unpack(t *testing.T, archive, bin string, want []string) string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	exe := filepath.Join(t.TempDir(), bin)
	var names []string
	r := tar.NewReader(z)
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		assert.Equal(t, byte(tar.TypeReg), h.Typeflag, "%s: %s is not a regular file", archive, h.Name)
		assert.Equal(t, [2]int{0, 0}, [2]int{h.Uid, h.Gid}, "%s: %s's owner", archive, h.Name)
		if h.Name != bin {
			continue
		}
		assert.Equal(t, int64(0o755), h.Mode&0o777, "%s: %s's mode", archive, bin)
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(exe, b, 0o755))
	}
	require.ElementsMatch(t, want, names, "%s's files", archive)
	return exe
}

// assertPlatform checks the executable's header names the os and arch.
func assertPlatform(t *testing.T, exe, goos, goarch string) {
	t.Helper()
	switch goos {
	case "linux":
		f, err := elf.Open(exe)
		require.NoError(t, err, "%s/%s: not ELF", goos, goarch)
		defer f.Close()
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]
		assert.Equal(t, want, f.Machine, "%s/%s: ELF machine", goos, goarch)
	case "darwin":
		f, err := macho.Open(exe)
		require.NoError(t, err, "%s/%s: not Mach-O", goos, goarch)
		defer f.Close()
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]
		assert.Equal(t, want, f.Cpu, "%s/%s: Mach-O CPU", goos, goarch)
	default:
		t.Errorf("no header check for %s/%s: add one", goos, goarch)
	}
}
