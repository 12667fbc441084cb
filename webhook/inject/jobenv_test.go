package inject

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/fleet/woodpecker"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// A fleet that states its job in its runner's environment (Woodpecker's
// CI_* variables) has it copied at CREATE into the annotations its job
// keys name, from the runner containers' literal values only, over
// whatever the pod came with: a pod cannot state a job its env does not,
// opted out or not.
func TestTheJobsEnvIsCopiedAtCreateAndCannotBeForged(t *testing.T) {
	cfg := configtest.Enforcing()
	commit := runnerpod.EnvAnnotation(woodpecker.CommitEnv)
	repo := runnerpod.EnvAnnotation(woodpecker.RepoEnv)
	url := runnerpod.EnvAnnotation(woodpecker.StepURLEnv)
	step := func() *corev1.Pod {
		p := podtest.Woodpecker("ci", "test").Obj()
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: woodpecker.CommitEnv, Value: "9fceb02d0ae598e95dc970b74767f19372d61af8"}, {Name: woodpecker.RepoEnv, Value: "acme/app"},
			{Name: woodpecker.StepURLEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		p.Annotations = map[string]string{commit: "forged", url: "https://evil.example.com/"}
		return p
	}
	for name, optOut := range map[string]bool{"instrumented": false, "opted out": true} {
		p := step()
		if optOut {
			p.Annotations[runnerpod.Inject] = "false"
		}
		out := Mutate(p, Facts{Requester: requester}, cfg)
		assert.Equal(t, woodpecker.Name, out.Preset, name)
		assert.Equal(t, "9fceb02d0ae598e95dc970b74767f19372d61af8", p.Annotations[commit], "%s: the env's, not the pod's", name)
		assert.Equal(t, "acme/app", p.Annotations[repo], name)
		assert.NotContains(t, p.Annotations, url, "%s: a value from elsewhere is not the creator's word", name)
		again := p.DeepCopy()
		Mutate(again, Facts{Requester: requester}, cfg)
		assert.Equal(t, p.Annotations, again.Annotations, "%s: a second call changes nothing", name)
	}
}
