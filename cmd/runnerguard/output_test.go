package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func records(t *testing.T) []death.Record {
	t.Helper()
	var rs []death.Record
	for _, w := range []*podtest.Wrapper{
		podtest.Runner("ci", "a").Terminated("runner", 137, "OOMKilled"),
		podtest.Runner("ci", "b").Terminated("runner", 1, "Error"),
	} {
		pod := w.Obj()
		runner, ok := presets.Match(pod, configtest.Enforcing().Presets)
		require.True(t, ok)
		rs = append(rs, death.New(pod, runner, runnerpod.RunnerStatus(pod, runner.Containers)))
	}
	return rs
}

// printed runs printRecords with -o format.
func printed(t *testing.T, format string) (string, error) {
	t.Helper()
	cmd := &cobra.Command{}
	o := newOutput(cmd)
	require.NoError(t, cmd.Flags().Set("output", format))
	var out bytes.Buffer
	err := o.printRecords(&out, records(t))
	return out.String(), err
}

// Every machine format prints the records as the RunnerDeath objects the
// CRD documents.
func TestRecordsPrintAsRunnerDeaths(t *testing.T) {
	out, err := printed(t, "json")
	require.NoError(t, err)
	var list v1alpha1.RunnerDeathList
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	assert.Equal(t, "runnerguard.io/v1alpha1", list.APIVersion)
	assert.Equal(t, "RunnerDeathList", list.Kind)
	require.Len(t, list.Items, 2)
	assert.Equal(t, "RunnerDeath", list.Items[0].Kind)
	assert.Equal(t, string(death.CgroupOOM), list.Items[0].Record.Class)

	out, err = printed(t, "yaml")
	require.NoError(t, err)
	assert.Contains(t, out, "kind: RunnerDeathList")
	assert.Contains(t, out, "class: error-exit")

	out, err = printed(t, "name")
	require.NoError(t, err)
	rs := records(t)
	assert.Equal(t, "runnerdeath.runnerguard.io/"+rs[0].Name()+"\nrunnerdeath.runnerguard.io/"+rs[1].Name()+"\n", out)

	out, err = printed(t, "jsonpath={.items[*].record.class}")
	require.NoError(t, err)
	assert.Equal(t, "cgroup-oom error-exit", out)

	out, err = printed(t, "custom-columns=POD:.record.pod,EXIT:record.exitCode,NODE:{.record.node},MISSING:.record.nothing")
	require.NoError(t, err)
	assert.Regexp(t, `^POD\s+EXIT\s+NODE\s+MISSING\na\s+137\s+\S+\s+<none>\nb\s+1\s+\S+\s+<none>\n$`, out)
}

func TestBadColumnsAreAUsageError(t *testing.T) {
	for _, spec := range []string{"custom-columns=", "custom-columns=POD", "custom-columns=:.a", "custom-columns=A:{.a", "custom-columns=A:.a[", "xml"} {
		_, err := printed(t, spec)
		var e exitError
		require.ErrorAs(t, err, &e, spec)
		assert.Equal(t, exitUsage, e.code, spec)
	}
}

func TestNoRecordPrintsAnEmptyList(t *testing.T) {
	cmd := &cobra.Command{}
	o := newOutput(cmd)
	require.NoError(t, cmd.Flags().Set("output", "json"))
	var out bytes.Buffer
	require.NoError(t, o.printRecords(&out, nil))
	assert.Contains(t, out.String(), `"items": []`)
}
