package refusal

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// FuzzParse: any value either fails to parse and gives nothing, or is one
// Format writes back the same and Merge keeps within bounds.
func FuzzParse(f *testing.F) {
	f.Add(formattedUnchecked(entries(entry("reaper", "delete", "busy", 5, 9, 2))))
	f.Add(`{"v":1,"entries":[],"dropped":3}`)
	f.Add(`{"v":1,"entries":null}`)
	f.Add(`{"v":1,"entries":[{"by":"a","verb":"exec","first":"2026-11-27T12:00:00Z","last":"2026-11-27T12:00:00Z","count":1}]} `)
	f.Fuzz(func(t *testing.T, value string) {
		l, err := Parse(value)
		if err != nil {
			require.Empty(t, l.Entries)
			return
		}
		s, err := Format(l)
		require.NoError(t, err)
		again, err := Parse(s)
		require.NoError(t, err)
		s2, _ := Format(again)
		require.Equal(t, s, s2, "Format and Parse round-trip")
		require.NoError(t, Validate(Merge(l, l)))
	})
}

// FuzzAdd: adding any refusal to any valid list gives a valid list that
// holds it or counts an entry dropped.
func FuzzAdd(f *testing.F) {
	f.Add(formattedUnchecked(entries(entry("reaper", "delete", "busy", 5, 9, 2))), "reaper", "delete", "busy", int64(3))
	f.Add(`{"v":1,"entries":[]}`, "\x1b[31malice", "exec", "", int64(-1e9))
	f.Fuzz(func(t *testing.T, value, by, verb, rule string, sec int64) {
		l, err := Parse(value)
		if err != nil || by == "" || verb == "" || cut(by, MaxBy) == "" || cut(verb, MaxVerb) == "" {
			return
		}
		got := Add(l, One{By: by, Verb: verb, Rule: rule, At: time.Unix(sec%(1<<34), 0)})
		require.NoError(t, Validate(got))
		s, err := Format(got)
		require.NoError(t, err)
		_, err = Parse(s)
		require.NoError(t, err, "what Add makes parses")
		require.True(t, holds(got, cut(by, MaxBy), cut(verb, MaxVerb)) || got.Dropped > l.Dropped || l.Dropped == math.MaxInt32,
			"the new refusal is kept, or an entry's drop is counted")
	})
}

func holds(l v1alpha1.Refusals, by, verb string) bool {
	for _, e := range l.Entries {
		if e.By == by && e.Verb == verb {
			return true
		}
	}
	return false
}
