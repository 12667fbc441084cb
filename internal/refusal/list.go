package refusal

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// Annotation holds a live runner pod's refusals (Format's value).
const Annotation = "runnerguard.io/refusals"

// Bounds of the stored value: a pod's annotations share one size limit
// with everything else on the pod, and anyone who can reach the webhook
// could try to grow it.
const (
	// MaxEntries is how many requester and verb pairs are kept; the
	// record's CRD holds the same bound.
	MaxEntries = 8
	// MaxBy, MaxVerb and MaxRule bound the strings in bytes; longer ones
	// are cut at a character's edge.
	MaxBy      = 256
	MaxVerb    = 32
	MaxRule    = 64
	MaxVersion = 64
)

// MaxPodMetadataBytes is how far anyone but runnerguard may grow a runner
// pod's labels, annotations and finalizers (keys and values, in bytes):
// the API server refuses a pod whose annotations pass 256 KiB, so a
// reaper that filled them to the brim would keep every refusal, and so its
// own, off the pod. The rest is room for runnerguard's own annotations, the
// largest refusals value among them. The chart's policy holds the same
// number (a drift test compares them).
const MaxPodMetadataBytes = 224 << 10

// version is the stored shape's version: a reader refuses any other.
const version = 1

// stored is the annotation's JSON.
type stored struct {
	V int `json:"v"`
	v1alpha1.Refusals
}

// One is a single refusal as the guard answered it: who, what, by which
// rule, when it was decided, and the pod's resourceVersion it was decided
// on.
type One struct {
	By, Verb, Rule string
	At             time.Time
	Version        string
	// Warned: allowed in warn mode, which enforce would have refused.
	Warned bool
}

// entry is o as a list entry, its strings cut to their bounds.
func (o One) entry() v1alpha1.Refusal {
	at := metav1.NewMicroTime(o.At.UTC().Truncate(time.Microsecond))
	return v1alpha1.Refusal{By: cut(o.By, MaxBy), Verb: cut(o.Verb, MaxVerb), Rule: cut(o.Rule, MaxRule), First: at, Last: at, Count: 1, Version: cut(o.Version, MaxVersion), Warned: o.Warned}
}

// Add merges o into l.
func Add(l v1alpha1.Refusals, o One) v1alpha1.Refusals { return Merge(l, entries(o.entry())) }

func entries(e ...v1alpha1.Refusal) v1alpha1.Refusals { return v1alpha1.Refusals{Entries: e} }

// Merge folds more's entries into l: an entry of the same requester,
// verb and mode (refused, or warned) adds its count and widens its times (its rule is the later one's);
// a new one is added; beyond MaxEntries the entry with the fewest refusals,
// then the least lately refused, is dropped and counted. Keeping the
// persistent requesters is the point: a reaper that retries is the one
// being hunted, and a flood of one-off names cannot push it out cheaply.
// Neither input is changed.
func Merge(l, more v1alpha1.Refusals) v1alpha1.Refusals {
	out := v1alpha1.Refusals{Entries: slices.Clone(l.Entries), Dropped: addSat(l.Dropped, more.Dropped)}
	for _, e := range more.Entries {
		i := slices.IndexFunc(out.Entries, func(x v1alpha1.Refusal) bool { return keyOf(x) == keyOf(e) })
		if i < 0 {
			out.Entries = append(out.Entries, e)
			continue
		}
		x := &out.Entries[i]
		n := e.Count
		if e.Version != x.Version && (sameAttempt(e.First, x.First) || sameAttempt(e.First, x.Last)) {
			n-- // e's first refusal is one x already counts, asked again
		}
		x.Count = addSat(x.Count, n)
		if e.First.Before(&x.First) {
			x.First = e.First
		}
		if !e.Last.Before(&x.Last) {
			x.Last, x.Rule, x.Version = e.Last, e.Rule, e.Version
		}
	}
	for len(out.Entries) > MaxEntries {
		i := weakest(out.Entries)
		out.Entries = slices.Delete(out.Entries, i, i+1)
		out.Dropped = addSat(out.Dropped, 1)
	}
	sortEntries(out.Entries)
	return out
}

// key is what an entry counts: one requester's attempts at one verb,
// refused or (Warned) let through by warn mode.
type key struct {
	by, verb string
	warned   bool
}

func keyOf(e v1alpha1.Refusal) key { return key{e.By, e.Verb, e.Warned} }

// Repeat is how close two refusals of one requester's verb, decided on
// two copies of the pod, are decided to be one attempt: the API server
// reviews a delete again at once when it first judged it on a stale copy
// of the pod (its storage retries the update with the live one), and both
// reviews are refused. Two attempts on one copy are always two. A requester's
// own retries are counted from the first that waits longer than this
// (a controller's backoff starts at a few milliseconds and doubles).
const Repeat = 150 * time.Millisecond

func sameAttempt(a, b metav1.MicroTime) bool {
	d := a.Sub(b.Time)
	return d > -Repeat && d < Repeat
}

// weakest is the entry Merge drops first: what warn mode let through
// before any real refusal (a warn namespace's execs, cheap to repeat, must
// not push out what enforce refused), then the fewest, least lately.
func weakest(es []v1alpha1.Refusal) int {
	w := 0
	for i, e := range es {
		switch {
		case e.Warned != es[w].Warned:
			if e.Warned {
				w = i
			}
		case e.Count < es[w].Count || e.Count == es[w].Count && e.Last.Before(&es[w].Last):
			w = i
		}
	}
	return w
}

func sortEntries(es []v1alpha1.Refusal) {
	slices.SortStableFunc(es, func(a, b v1alpha1.Refusal) int {
		return cmp.Or(a.First.Compare(b.First.Time), cmp.Compare(a.By, b.By), cmp.Compare(a.Verb, b.Verb), compareBool(a.Warned, b.Warned))
	})
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func addSat(a, b int32) int32 {
	if s := int64(a) + int64(b); s < math.MaxInt32 {
		return int32(s)
	}
	return math.MaxInt32
}

// cut is s cut to at most n bytes at a character's edge, invalid UTF-8
// dropped.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// Format is l as the annotation's value.
func Format(l v1alpha1.Refusals) (string, error) {
	b, err := json.Marshal(stored{V: version, Refusals: l})
	return string(b), err
}

// Parse reads an annotation's value, and says what is wrong with one that
// is not Format's: a stored value is only ever runnerguard's, so a bad one
// is a bug or a change made around the chart's policy, and is not merged
// into (the Writer starts afresh, counting it dropped).
func Parse(s string) (v1alpha1.Refusals, error) {
	var st stored
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return v1alpha1.Refusals{}, fmt.Errorf("refusals: not the stored JSON: %w", err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return v1alpha1.Refusals{}, errors.New("refusals: data after the stored JSON")
	}
	if st.V != version {
		return v1alpha1.Refusals{}, fmt.Errorf("refusals: version %d, want %d", st.V, version)
	}
	if err := Validate(st.Refusals); err != nil {
		return v1alpha1.Refusals{}, err
	}
	return st.Refusals, nil
}

// Validate says what in l Merge and Format could not have made.
func Validate(l v1alpha1.Refusals) error {
	if len(l.Entries) > MaxEntries {
		return fmt.Errorf("refusals: %d entries, at most %d", len(l.Entries), MaxEntries)
	}
	if l.Dropped < 0 {
		return fmt.Errorf("refusals: dropped %d is negative", l.Dropped)
	}
	seen := map[key]bool{}
	for i, e := range l.Entries {
		if err := validEntry(e); err != nil {
			return fmt.Errorf("refusals: entry %d: %w", i, err)
		}
		if seen[keyOf(e)] {
			return fmt.Errorf("refusals: entry %d: %q refused %s twice in the list", i, e.By, e.Verb)
		}
		seen[keyOf(e)] = true
	}
	return nil
}

func validEntry(e v1alpha1.Refusal) error {
	for _, f := range []struct {
		name, v string
		max     int
	}{{"by", e.By, MaxBy}, {"verb", e.Verb, MaxVerb}, {"rule", e.Rule, MaxRule}, {"version", e.Version, MaxVersion}} {
		switch {
		case len(f.v) > f.max:
			return fmt.Errorf("%s is %d bytes, at most %d", f.name, len(f.v), f.max)
		case !utf8.ValidString(f.v):
			return fmt.Errorf("%s is not UTF-8", f.name)
		}
	}
	switch {
	case e.By == "":
		return errors.New("no requester")
	case e.Verb == "":
		return errors.New("no verb")
	case e.Count < 1:
		return fmt.Errorf("count %d, at least 1", e.Count)
	case e.First.IsZero() || e.Last.IsZero():
		return errors.New("no first or last time")
	case e.Last.Before(&e.First):
		return errors.New("last before first")
	}
	return nil
}
