package refusal

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func at(s int) metav1.MicroTime { return metav1.NewMicroTime(t0.Add(time.Duration(s) * time.Second)) }

func micro(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(t0.Add(d)) }

// entry is an entry whose latest refusal was decided on version "1".
func entry(by, verb, rule string, first, last int, count int32) v1alpha1.Refusal {
	return v1alpha1.Refusal{By: by, Verb: verb, Rule: rule, First: at(first), Last: at(last), Count: count, Version: "1"}
}

func one(by, verb, rule string, s int) One {
	return One{By: by, Verb: verb, Rule: rule, At: t0.Add(time.Duration(s) * time.Second), Version: "1"}
}

// warnedFull is a full list whose second entry is warn mode's, refused
// more often than any other.
func warnedFull() v1alpha1.Refusals {
	l := v1alpha1.Refusals{}
	for i := range MaxEntries {
		l.Entries = append(l.Entries, entry(fmt.Sprintf("u%d", i), "delete", "busy", i, i, 2))
	}
	l.Entries[1].Warned, l.Entries[1].Count = true, 50
	return l
}

func TestAdd(t *testing.T) {
	full := v1alpha1.Refusals{}
	for i := range MaxEntries {
		full.Entries = append(full.Entries, entry(fmt.Sprintf("u%d", i), "delete", "busy", i, i, 2))
	}
	full.Entries[3].Count = 1 // the one refused least
	cases := []struct {
		name string
		l    v1alpha1.Refusals
		o    One
		want v1alpha1.Refusals
	}{
		{"a first refusal starts the list", v1alpha1.Refusals{}, one("reaper", "delete", "busy", 5),
			entries(entry("reaper", "delete", "busy", 5, 5, 1))},
		{"the same requester and verb again adds to its count and moves its last time", entries(entry("reaper", "delete", "busy", 5, 5, 1)),
			one("reaper", "delete", "job-assigned", 9), entries(entry("reaper", "delete", "job-assigned", 5, 9, 2))},
		{"a refusal answered out of order widens the first time and keeps the later rule", entries(entry("reaper", "delete", "busy", 5, 9, 2)),
			one("reaper", "delete", "idle-unknown", 3), entries(entry("reaper", "delete", "busy", 3, 9, 3))},
		{"another verb of the same requester is its own entry", entries(entry("reaper", "delete", "busy", 5, 5, 1)),
			one("reaper", "exec", "busy", 6), entries(entry("reaper", "delete", "busy", 5, 5, 1), entry("reaper", "exec", "busy", 6, 6, 1))},
		{"what warn mode let through is its own entry beside the real refusals", entries(entry("reaper", "delete", "busy", 5, 5, 1)),
			One{By: "reaper", Verb: "delete", Rule: "busy", At: t0.Add(6 * time.Second), Warned: true},
			entries(entry("reaper", "delete", "busy", 5, 5, 1), v1alpha1.Refusal{By: "reaper", Verb: "delete", Rule: "busy", First: at(6), Last: at(6), Count: 1, Warned: true})},
		{"a second requester is kept beside the first, in order of their first refusal", entries(entry("reaper", "delete", "busy", 5, 5, 1)),
			one("alice", "eviction", "busy", 2), entries(entry("alice", "eviction", "busy", 2, 2, 1), entry("reaper", "delete", "busy", 5, 5, 1))},
		{"the API server's second review of one delete, a moment later on a fresher copy, is the same attempt", entries(entry("reaper", "delete", "busy", 5, 5, 1)),
			One{By: "reaper", Verb: "delete", Rule: "busy", At: t0.Add(5*time.Second + Repeat/2), Version: "2"},
			entries(v1alpha1.Refusal{By: "reaper", Verb: "delete", Rule: "busy", First: at(5), Last: micro(5*time.Second + Repeat/2), Count: 1, Version: "2"})},
		{"so is the first review, written after the second by another replica", entries(entry("reaper", "delete", "busy", 5, 5, 1)),
			One{By: "reaper", Verb: "delete", Rule: "busy", At: t0.Add(5*time.Second - Repeat/2), Version: "0"},
			entries(v1alpha1.Refusal{By: "reaper", Verb: "delete", Rule: "busy", First: micro(5*time.Second - Repeat/2), Last: at(5), Count: 1, Version: "1"})},
		{"two attempts a moment apart on one copy are two", entries(entry("reaper", "delete", "busy", 5, 5, 1)),
			One{By: "reaper", Verb: "delete", Rule: "busy", At: t0.Add(5*time.Second + Repeat/2), Version: "1"},
			entries(v1alpha1.Refusal{By: "reaper", Verb: "delete", Rule: "busy", First: at(5), Last: micro(5*time.Second + Repeat/2), Count: 2, Version: "1"})},
		{"a retry after the moment is another attempt", entries(entry("reaper", "delete", "busy", 5, 5, 1)),
			One{By: "reaper", Verb: "delete", Rule: "busy", At: t0.Add(5*time.Second + Repeat), Version: "2"},
			entries(v1alpha1.Refusal{By: "reaper", Verb: "delete", Rule: "busy", First: at(5), Last: micro(5*time.Second + Repeat), Count: 2, Version: "2"})},
		{"a count at its largest stays there", entries(entry("reaper", "delete", "busy", 5, 5, math.MaxInt32)),
			one("reaper", "delete", "busy", 6), entries(entry("reaper", "delete", "busy", 5, 6, math.MaxInt32))},
		{"a full list drops the entry refused fewest times and counts it", full, one("new", "delete", "busy", 100),
			func() v1alpha1.Refusals {
				w := v1alpha1.Refusals{Dropped: 1}
				for _, e := range full.Entries {
					if e.By != "u3" {
						w.Entries = append(w.Entries, e)
					}
				}
				w.Entries = append(w.Entries, entry("new", "delete", "busy", 100, 100, 1))
				return w
			}()},
		{"a full list drops what warn mode let through before any real refusal", warnedFull(), one("new", "delete", "busy", 100),
			func() v1alpha1.Refusals {
				w := warnedFull()
				w.Entries, w.Dropped = slices.Delete(w.Entries, 1, 2), 1
				w.Entries = append(w.Entries, entry("new", "delete", "busy", 100, 100, 1))
				return w
			}()},
		{"a long requester is cut at a character's edge", v1alpha1.Refusals{}, one(strings.Repeat("é", MaxBy), "delete", "busy", 1),
			entries(entry(strings.Repeat("é", MaxBy/2), "delete", "busy", 1, 1, 1))},
		{"invalid UTF-8 in a requester is dropped", v1alpha1.Refusals{}, one("bad\xffname", "delete", "busy", 1),
			entries(entry("badname", "delete", "busy", 1, 1, 1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, err := Format(c.l)
			require.NoError(t, err)
			got := Add(c.l, c.o)
			assert.Equal(t, formatted(t, c.want), formatted(t, got))
			require.NoError(t, Validate(got))
			after, _ := Format(c.l)
			assert.Equal(t, before, after, "the input is unchanged")
		})
	}
}

func TestAFullListKeepsTheRequesterThatRetries(t *testing.T) {
	l := Add(v1alpha1.Refusals{}, one("reaper", "delete", "busy", 0))
	l = Add(l, one("reaper", "delete", "busy", 1))
	for i := range 50 {
		l = Add(l, one(fmt.Sprintf("flood-%d", i), "exec", "busy", 2+i))
	}
	require.Len(t, l.Entries, MaxEntries)
	assert.Equal(t, "reaper", l.Entries[0].By)
	assert.Equal(t, int32(2), l.Entries[0].Count)
	assert.Equal(t, int32(50+1-MaxEntries), l.Dropped)
}

func formatted(t *testing.T, l v1alpha1.Refusals) string {
	t.Helper()
	s, err := Format(l)
	require.NoError(t, err)
	return s
}

func TestParse(t *testing.T) {
	good := formatted(t, entries(entry("reaper", "delete", "busy", 5, 9, 2)))
	cases := []struct {
		name, value, err string
	}{
		{"Format's value reads back", good, ""},
		{"not JSON is refused", "reaper", "not the stored JSON"},
		{"another version is refused", strings.Replace(good, `"v":1`, `"v":2`, 1), "version 2, want 1"},
		{"an unknown field is refused", strings.Replace(good, `"v":1`, `"v":1,"x":1`, 1), "unknown field"},
		{"data after the value is refused", good + "{}", "data after"},
		{"an entry without a requester is refused", strings.Replace(good, `"by":"reaper"`, `"by":""`, 1), "no requester"},
		{"a count of zero is refused", strings.Replace(good, `"count":2`, `"count":0`, 1), "count 0"},
		{"a last time before the first is refused", formattedUnchecked(entries(entry("r", "delete", "busy", 9, 5, 1))), "last before first"},
		{"a requester twice for one verb is refused", formattedUnchecked(entries(entry("r", "delete", "busy", 1, 1, 1), entry("r", "delete", "busy", 2, 2, 1))), "twice"},
		{"too many entries are refused", formattedUnchecked(func() v1alpha1.Refusals {
			var l v1alpha1.Refusals
			for i := range MaxEntries + 1 {
				l.Entries = append(l.Entries, entry(fmt.Sprint(i), "delete", "busy", 1, 1, 1))
			}
			return l
		}()), "at most"},
		{"a requester past its bound is refused", formattedUnchecked(entries(entry(strings.Repeat("a", MaxBy+1), "delete", "busy", 1, 1, 1))), "by is"},
		{"a negative dropped count is refused", formattedUnchecked(v1alpha1.Refusals{Dropped: -1}), "negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Parse(c.value)
			if c.err == "" {
				require.NoError(t, err)
				assert.Equal(t, c.value, formatted(t, l))
				return
			}
			require.ErrorContains(t, err, c.err)
			assert.Empty(t, l.Entries, "bad input gives nothing")
		})
	}
}

func formattedUnchecked(l v1alpha1.Refusals) string {
	s, _ := Format(l)
	return s
}

func TestFromPod(t *testing.T) {
	l, err := FromPod(map[string]string{"other": "x"})
	assert.NoError(t, err)
	assert.Nil(t, l, "no annotation, no refusals")
	_, err = FromPod(map[string]string{Annotation: "{"})
	assert.ErrorContains(t, err, "not the stored JSON")
	l, err = FromPod(map[string]string{Annotation: formattedUnchecked(entries(entry("r", "exec", "busy", 1, 2, 2)))})
	require.NoError(t, err)
	assert.Equal(t, "r", l.Entries[0].By)
}
