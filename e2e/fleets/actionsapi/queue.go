package actionsapi

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// The queue's decisions, each called with s.mu held.

// notify wakes every long poll.
func (s *Service) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait returns a channel closed on the next change; call with s.mu held.
func (s *Service) wait() <-chan struct{} { return s.changed }

// tell queues one message of job messages for the listener.
func (s *Service) tell(msgs ...wireJobMessage) {
	body, _ := json.Marshal(msgs)
	s.nextID++
	s.messages = append(s.messages, wireMessage{MessageID: s.nextID, MessageType: "RunnerScaleSetJobMessages", Body: string(body)})
	s.notify()
}

// jobMessage is a job message of type kind about j, naming r if given.
func (s *Service) jobMessage(kind string, j *job, r *runner) wireJobMessage {
	m := wireJobMessage{
		MessageType: kind, RunnerRequestID: j.spec.RequestID, JobID: j.spec.ID, JobDisplayName: j.spec.Name,
		OwnerName: s.org, RepositoryName: "fleet", EventName: "push", WorkflowRunID: j.spec.RequestID,
		JobWorkflowRef: s.org + "/fleet/.github/workflows/fleet.yaml@refs/heads/main",
		RequestLabels:  []string{"fleet"}, QueueTime: time.Now(), Result: j.result,
	}
	if kind == "JobAvailable" {
		m.AcquireJobURL = s.base + "/service/_apis/runtime/runnerscalesets/acquirejob/" + strconv.FormatInt(j.spec.RequestID, 10)
	}
	if r != nil {
		m.RunnerID, m.RunnerName, m.RunnerAssignTime = r.id, r.name, time.Now()
	}
	if kind == "JobCompleted" {
		m.FinishTime = time.Now()
	}
	return m
}

// stats are the scale set's statistics now: assigned jobs are the ones
// acquired or running, which the listener scales to.
func (s *Service) stats() *wireStats {
	st := &wireStats{}
	for _, j := range s.jobs {
		switch j.state {
		case jobAvailable:
			st.TotalAvailableJobs++
		case jobAcquired:
			st.TotalAcquiredJobs++
			st.TotalAssignedJobs++
		case jobRunning:
			st.TotalRunningJobs++
			st.TotalAssignedJobs++
		}
	}
	for _, r := range s.runners {
		if r.removed {
			continue
		}
		st.TotalRegisteredRunners++
		if j := s.jobs[r.jobID]; j != nil && j.state == jobRunning {
			st.TotalBusyRunners++
		} else {
			st.TotalIdleRunners++
		}
	}
	return st
}

// acquire takes the available jobs of ids for the scale set.
func (s *Service) acquire(ids []int64) []int64 {
	var got []int64
	var msgs []wireJobMessage
	for _, id := range ids {
		if j := s.jobs[id]; j != nil && j.state == jobAvailable {
			j.state = jobAcquired
			got = append(got, id)
			msgs = append(msgs, s.jobMessage("JobAssigned", j, nil))
		}
	}
	if len(msgs) > 0 {
		s.tell(msgs...)
	}
	return got
}

// assign gives r the oldest acquired job not held, if any.
func (s *Service) assign(r *runner) *job {
	var pick *job
	for _, j := range s.jobs {
		if j.state == jobAcquired && !j.spec.Hold && (pick == nil || j.spec.RequestID < pick.spec.RequestID) {
			pick = j
		}
	}
	if pick == nil {
		return nil
	}
	pick.state, pick.runnerID, r.jobID = jobRunning, r.id, pick.spec.RequestID
	s.tell(s.jobMessage("JobStarted", pick, r))
	return pick
}

// complete ends j with result.
func (s *Service) complete(j *job, result string) {
	j.state, j.result = jobCompleted, result
	s.tell(s.jobMessage("JobCompleted", j, s.runners[j.runnerID]))
}

// busy reports whether r's job still runs: the service then refuses to
// remove it.
func (s *Service) busy(r *runner) bool {
	j := s.jobs[r.jobID]
	return j != nil && j.state == jobRunning
}

// next waits, up to the poll's wait, for the first message after last.
func (s *Service) next(ctx context.Context, last int) (wireMessage, bool) {
	deadline := time.NewTimer(s.pollWait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		for _, m := range s.messages {
			if m.MessageID > last {
				m.Statistics = s.stats()
				s.mu.Unlock()
				return m, true
			}
		}
		ch := s.wait()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return wireMessage{}, false
		case <-ctx.Done():
			return wireMessage{}, false
		}
	}
}

// drop deletes the message id, the listener's acknowledgement.
func (s *Service) drop(id int) {
	for i, m := range s.messages {
		if m.MessageID == id {
			s.messages = append(s.messages[:i], s.messages[i+1:]...)
			return
		}
	}
}
