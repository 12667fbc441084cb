package record

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
)

// WriteLine writes l as one JSON object and a newline in a single Write,
// so a reader of the stream never sees half a line.
func WriteLine(w io.Writer, l Line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("encode vitals line: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write vitals line: %w", err)
	}
	return nil
}

// EncodeFinal encodes f for a termination message. The kubelet cuts a
// message at MaxFinalBytes, and a cut message is not JSON, so when f does
// not fit, Missing is shortened (ending in "...") until it does, then the
// containers are dropped: the counters, peak and limit are what the death
// record needs.
func EncodeFinal(f Final) ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode vitals final reading: %w", err)
	}
	all := f.Missing
	for keep := len(all) / 2; len(b) > MaxFinalBytes && len(all) > 0; keep /= 2 {
		f.Missing = append(slices.Clip(all[:keep]), truncated)
		if b, err = json.Marshal(f); err != nil {
			return nil, fmt.Errorf("encode vitals final reading: %w", err)
		}
		if keep == 0 {
			break
		}
	}
	// Then the containers that saw no OOM, then all: the pod's counters are
	// still the record's.
	for _, keepKilled := range []bool{true, false} {
		if len(b) <= MaxFinalBytes || len(f.Containers) == 0 {
			break
		}
		f.Containers = maps.Clone(f.Containers)
		maps.DeleteFunc(f.Containers, func(_ string, m FinalMemory) bool { return !keepKilled || m.OOMKill == 0 })
		if b, err = json.Marshal(f); err != nil {
			return nil, fmt.Errorf("encode vitals final reading: %w", err)
		}
	}
	if len(b) > MaxFinalBytes {
		return nil, fmt.Errorf("vitals final reading is %d bytes, over %d", len(b), MaxFinalBytes)
	}
	return b, nil
}

// truncated ends a Missing list that EncodeFinal had to shorten.
const truncated = "..."
