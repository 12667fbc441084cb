package vitals

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/runnerguard/runnerguard/vitals/record"
)

// Names of the files in the shared folder.
const (
	EventsFile = "memory.events"
	PeakFile   = "memory.peak"
	VitalsFile = "vitals.json"
)

// writeShared writes the shared folder's files for l: the pod's
// memory.events in the kernel's format (on v1 made from memory.oom_control),
// memory.peak in bytes, and vitals.json holding the line. A file whose
// value is unknown keeps its last content.
func writeShared(dir string, l record.Line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if err := writeAtomic(dir, VitalsFile, append(b, '\n')); err != nil {
		return err
	}
	if e := l.Pod.Events; e != nil {
		text := fmt.Sprintf("low %d\nhigh %d\nmax %d\noom %d\noom_kill %d\noom_group_kill %d\n",
			e.Low, e.High, e.Max, e.OOM, e.OOMKill, e.OOMGroupKill)
		if err := writeAtomic(dir, EventsFile, []byte(text)); err != nil {
			return err
		}
	}
	if p := l.Pod.Peak; p != nil {
		if err := writeAtomic(dir, PeakFile, fmt.Appendf(nil, "%d\n", *p)); err != nil {
			return err
		}
	}
	return nil
}

// writeAtomic replaces dir/name by a temp file renamed over it, so the
// runner never reads a half-written file. It is world-readable because
// the runner container may run as another user.
func writeAtomic(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}
