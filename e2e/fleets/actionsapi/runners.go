package actionsapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// RunnerScript is the runner container's command (sh -c), standing in for
// GitHub's runner: with its JIT config (ARC's env
// ACTIONS_RUNNER_INPUT_JITCONFIG) it asks the service at $ACTIONS_STANDIN
// for a job until it gets one, runs it as a child, reports the exit code,
// lingers as long as the service answers, and exits 0, as GitHub's
// ephemeral runner exits after its one job whatever the job's result. A
// SIGTERM ends it with 143. Its wget has no -T: the node image's busybox
// wget (1.35) crashes with one.
const RunnerScript = `trap 'exit 143' TERM
jit="$ACTIONS_RUNNER_INPUT_JITCONFIG"
echo "runner started"
while :; do
  wget -q -O /tmp/job "$ACTIONS_STANDIN/runner/job?jit=$jit" & wait $!
  [ -s /tmp/job ] && break
  sleep 1 & wait $!
done
echo "job started"
sh /tmp/job & wait $!
rc=$?
echo "job done: exit $rc"
linger=$(wget -q -O - --post-data "" "$ACTIONS_STANDIN/runner/done?jit=$jit&rc=$rc")
sleep "${linger:-0}" & wait $!
echo "runner exits"
exit 0
`

func (s *Service) generateJitConfig(w http.ResponseWriter, r *http.Request) {
	var in wireJitSetting
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Name == "" {
		http.Error(w, "a runner needs a name", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.scaleSets[pathInt(r, "id")]
	if set == nil {
		http.Error(w, "no such scale set", http.StatusNotFound)
		return
	}
	for _, rn := range s.runners {
		if rn.name == in.Name && !rn.removed {
			writeException(w, http.StatusConflict, exceptionAgentExists, "a runner named "+in.Name+" exists")
			return
		}
	}
	s.nextID++
	rn := &runner{id: s.nextID, name: in.Name, scaleSet: set.ID, token: fmt.Sprintf("rg-jit-%d", s.nextID)}
	s.runners[rn.id] = rn
	writeJSON(w, http.StatusOK, wireJitConfig{Runner: &wireRunner{ID: rn.id, Name: rn.name, RunnerScaleSetID: set.ID}, EncodedJITConfig: rn.token})
}

func (s *Service) getRunner(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.runners[pathInt(r, "id")]
	if rn == nil || rn.removed {
		writeException(w, http.StatusNotFound, exceptionAgentNotFound, "no runner "+r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, s.reference(rn))
}

func (s *Service) getRunnerByName(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := wireList[wireRunner]{}
	for _, rn := range s.runners {
		if rn.name == r.URL.Query().Get("agentName") && !rn.removed {
			out.Value = append(out.Value, s.reference(rn))
		}
	}
	out.Count = len(out.Value)
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) reference(rn *runner) wireRunner {
	return wireRunner{ID: rn.id, Name: rn.name, RunnerScaleSetID: rn.scaleSet}
}

// removeRunner removes a runner, unless its job still runs. Removing one
// already gone succeeds: ARC removes a runner it scaled down a second time
// from its EphemeralRunner's finalizer.
func (s *Service) removeRunner(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.runners[pathInt(r, "id")]
	if rn != nil && s.busy(rn) {
		s.refused++
		writeException(w, http.StatusBadRequest, exceptionJobStillRunning, "the runner's job is still running")
		return
	}
	if rn != nil {
		rn.removed = true
		s.notify()
	}
	w.WriteHeader(http.StatusNoContent)
}

// runnerJob is a runner's long poll for its job: the job's script, or an
// empty answer when none came in time.
func (s *Service) runnerJob(w http.ResponseWriter, r *http.Request) {
	deadline := time.After(s.pollWait)
	for {
		s.mu.Lock()
		rn := s.byToken(r.URL.Query().Get("jit"))
		if rn == nil {
			s.mu.Unlock()
			http.Error(w, "no runner has this JIT config", http.StatusUnauthorized)
			return
		}
		var j *job
		if rn.jobID == 0 && !rn.removed {
			j = s.assign(rn)
		}
		ch := s.wait()
		s.mu.Unlock()
		if j != nil {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(j.spec.Script + "\n"))
			return
		}
		select {
		case <-ch:
		case <-deadline:
			w.WriteHeader(http.StatusOK)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// runnerDone is a runner reporting its job's exit code; the answer is how
// many seconds it lingers.
func (s *Service) runnerDone(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.byToken(r.URL.Query().Get("jit"))
	if rn == nil || s.jobs[rn.jobID] == nil {
		http.Error(w, "no job of this runner's", http.StatusNotFound)
		return
	}
	j := s.jobs[rn.jobID]
	if j.state == jobRunning {
		result := "succeeded"
		if r.URL.Query().Get("rc") != "0" {
			result = "failed"
		}
		s.complete(j, result)
	}
	_, _ = w.Write([]byte(strconv.Itoa(int(j.spec.Linger / time.Second))))
}

func (s *Service) byToken(token string) *runner {
	for _, rn := range s.runners {
		if rn.token == token {
			return rn
		}
	}
	return nil
}
