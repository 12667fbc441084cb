package recorder

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
)

func TestExpired(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	rec := func(ns, name string, class death.Class, age time.Duration) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			CreationTimestamp: metav1.NewTime(now.Add(-age)), Labels: map[string]string{death.ClassLabel: string(class)}}}
	}
	// The records of deaths pods still show, by namespace; asked only of
	// namespaces over the count.
	asked := map[string]bool{}
	shownDeaths := map[string]map[string]bool{"c": {"1": true, "2": true}}
	live := func(ns string) (map[string]bool, error) {
		asked[ns] = true
		return shownDeaths[ns], nil
	}
	policy := config.Records{MaxAge: metav1.Duration{Duration: 30 * 24 * time.Hour}, CleanMaxAge: metav1.Duration{Duration: 24 * time.Hour}, MaxPerNamespace: 2}
	names := func(items []metav1.PartialObjectMetadata) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Namespace+"/"+it.Name)
		}
		return out
	}
	cases := []struct {
		name  string
		items []metav1.PartialObjectMetadata
		want  []string
	}{
		{name: "nothing old", items: []metav1.PartialObjectMetadata{rec("a", "oom", death.CgroupOOM, time.Hour)}},
		{name: "an abnormal death past maxAge",
			items: []metav1.PartialObjectMetadata{rec("a", "oom", death.CgroupOOM, 31*24*time.Hour), rec("a", "oom2", death.CgroupOOM, 29*24*time.Hour)},
			want:  []string{"a/oom"}},
		{name: "clean exits and jobs' normal ends go sooner",
			items: []metav1.PartialObjectMetadata{rec("a", "clean", death.CleanExit, 25*time.Hour), rec("a", "ended", death.JobEnded, 25*time.Hour), rec("a", "kill", death.SigKill, 25*time.Hour)},
			want:  []string{"a/clean", "a/ended"}},
		{name: "the oldest beyond the count per namespace",
			items: []metav1.PartialObjectMetadata{rec("a", "1", death.SigKill, 3*time.Hour), rec("a", "2", death.SigKill, 2*time.Hour), rec("a", "3", death.SigKill, time.Hour),
				rec("b", "1", death.SigKill, 3*time.Hour), rec("b", "2", death.SigKill, 2*time.Hour)},
			want: []string{"a/1"}},
		{name: "the count spares the records of deaths pods still show: a leader would write them again",
			items: []metav1.PartialObjectMetadata{rec("c", "1", death.SigKill, 4*time.Hour), rec("c", "2", death.SigKill, 3*time.Hour), rec("c", "3", death.SigKill, 2*time.Hour), rec("c", "4", death.SigKill, time.Hour)},
			want:  []string{"c/3", "c/4"}},
		{name: "over the count, normal records go before older abnormal ones: short-lived pods cannot push an OOM out",
			items: []metav1.PartialObjectMetadata{rec("a", "oom", death.CgroupOOM, 5*time.Hour), rec("a", "evicted", death.NodeEviction, 4*time.Hour),
				rec("a", "clean-1", death.CleanExit, 3*time.Hour), rec("a", "ended", death.JobEnded, 2*time.Hour), rec("a", "clean-2", death.CleanExit, time.Hour)},
			want: []string{"a/clean-1", "a/ended", "a/clean-2"}},
		{name: "with no normal record left, the oldest abnormal ones go",
			items: []metav1.PartialObjectMetadata{rec("a", "oom", death.CgroupOOM, 5*time.Hour), rec("a", "clean", death.CleanExit, 4*time.Hour),
				rec("a", "kill", death.SigKill, 3*time.Hour), rec("a", "oom2", death.CgroupOOM, 2*time.Hour)},
			want: []string{"a/clean", "a/oom"}},
		{name: "a record without a class label counts as abnormal",
			items: []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "unlabelled", CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Hour))}},
				rec("a", "kill", death.SigKill, 2*time.Hour), rec("a", "clean", death.CleanExit, time.Hour)},
			want: []string{"a/clean"}},
		{name: "the spared records of shown deaths are spared whatever their class",
			items: []metav1.PartialObjectMetadata{rec("c", "1", death.SigKill, 4*time.Hour), rec("c", "2", death.CleanExit, 3*time.Hour), rec("c", "3", death.CleanExit, 2*time.Hour), rec("c", "4", death.CleanExit, time.Hour)},
			want:  []string{"c/3", "c/4"}},
		{name: "normal records of pods left in place do not push out the abnormal records of pods that are gone: the namespace stays over the count",
			items: []metav1.PartialObjectMetadata{rec("c", "3", death.CgroupOOM, 4*time.Hour), rec("c", "4", death.SigKill, 3*time.Hour), rec("c", "1", death.CleanExit, 2*time.Hour), rec("c", "2", death.JobEnded, time.Hour)}},
		{name: "normal records of pods that are gone go first, then the count stops at the abnormal ones while a shown normal one is kept",
			items: []metav1.PartialObjectMetadata{rec("c", "oom", death.CgroupOOM, 5*time.Hour), rec("c", "1", death.CleanExit, 4*time.Hour), rec("c", "gone-1", death.CleanExit, 3*time.Hour),
				rec("c", "2", death.CleanExit, 2*time.Hour), rec("c", "gone-2", death.CleanExit, time.Hour)},
			want: []string{"c/gone-1", "c/gone-2"}},
		{name: "with only abnormal records, the oldest a pod no longer shows go",
			items: []metav1.PartialObjectMetadata{rec("c", "1", death.SigKill, 4*time.Hour), rec("c", "oom", death.CgroupOOM, 3*time.Hour), rec("c", "2", death.SigKill, 2*time.Hour), rec("c", "kill", death.SigKill, time.Hour)},
			want:  []string{"c/oom", "c/kill"}},
		{name: "past its age, a shown death's record goes: it is never written again",
			items: []metav1.PartialObjectMetadata{rec("c", "1", death.CleanExit, 25*time.Hour)},
			want:  []string{"c/1"}},
		{name: "a record without a class label is kept the longer time",
			items: []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x", CreationTimestamp: metav1.NewTime(now.Add(-25 * time.Hour))}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Expired(tc.items, policy, now, live)
			require.NoError(t, err)
			assert.Equal(t, tc.want, names(got))
		})
	}
	assert.Equal(t, map[string]bool{"a": true, "c": true}, asked, "pods read only where the count bites")
	unlimited := policy
	unlimited.MaxPerNamespace = 0
	got, err := Expired(cases[3].items, unlimited, now, live)
	require.NoError(t, err)
	assert.Empty(t, got, "0: no count limit")
	_, err = Expired(cases[3].items, policy, now, func(string) (map[string]bool, error) { return nil, errors.New("cache not synced") })
	assert.Error(t, err, "no pods to spare, nothing removed by count")
}
