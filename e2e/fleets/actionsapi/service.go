// Package actionsapi is a stand-in for GitHub's Actions service, enough for
// ARC's real controller and listener (gha-runner-scale-set 0.14) to run a
// scale set: the GitHub API's registration token and runner registration,
// and the Actions service's runner scale sets, message sessions, the
// message queue (JobAvailable, JobAssigned, JobStarted and JobCompleted),
// acquiring jobs, JIT runner configs, and getting and removing runners
// (refused with JobStillRunning while a runner's job runs). Its runners are
// busybox scripts (RunnerScript): each asks the stand-in for a job, runs
// it, reports its exit code and exits, as GitHub's ephemeral runner does.
package actionsapi

import (
	"fmt"
	"sync"
	"time"
)

// Job is a workflow job to queue: Script runs in the runner's container.
type Job struct {
	RequestID int64
	ID        string
	Name      string
	Script    string
	// Linger is how long the runner goes on after reporting the job done
	// before it exits (the real runner uploads its logs meanwhile).
	Linger time.Duration
	// Hold keeps the job from every runner until Release or Cancel.
	Hold bool
}

// The states a job passes through.
const (
	jobAvailable = "available"
	jobAcquired  = "acquired"
	jobRunning   = "running"
	jobCompleted = "completed"
)

type job struct {
	spec     Job
	state    string
	runnerID int
	result   string
}

type runner struct {
	id       int
	name     string
	scaleSet int
	token    string
	jobID    int64 // the job it runs or ran; 0 before one
	removed  bool
}

// Service is the stand-in; serve it with ServeHTTP once Start named its
// address.
type Service struct {
	mu       sync.Mutex
	changed  chan struct{}
	base     string
	org      string
	pat      string
	pollWait time.Duration

	scaleSets map[int]*wireScaleSet
	runners   map[int]*runner
	jobs      map[int64]*job
	messages  []wireMessage
	nextID    int
	// refused counts RemoveRunner calls refused with JobStillRunning.
	refused int
}

// New returns a service for organization org whose GitHub API takes the
// personal access token pat. Long polls (the listener's and the runners')
// wait up to pollWait for something to tell.
func New(org, pat string, pollWait time.Duration) *Service {
	return &Service{
		changed: make(chan struct{}), org: org, pat: pat, pollWait: pollWait,
		scaleSets: map[int]*wireScaleSet{}, runners: map[int]*runner{}, jobs: map[int64]*job{},
	}
}

// SetBase names the URL the service is reached at (the runner pods', the
// controller's and the listener's way in).
func (s *Service) SetBase(base string) { s.mu.Lock(); s.base = base; s.mu.Unlock() }

// ConfigURL is the githubConfigUrl ARC is given: the organization on this
// GitHub (an Enterprise Server, by its host).
func (s *Service) ConfigURL() string { s.mu.Lock(); defer s.mu.Unlock(); return s.base + "/" + s.org }

// CreateScaleSet registers a runner scale set and returns its id.
func (s *Service) CreateScaleSet(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createScaleSet(wireScaleSet{Name: name, RunnerGroupID: 1})
}

func (s *Service) createScaleSet(set wireScaleSet) int {
	s.nextID++
	set.ID = s.nextID
	if len(set.Labels) == 0 {
		set.Labels = []wireLabel{{Type: "System", Name: set.Name}}
	}
	s.scaleSets[set.ID] = &set
	return set.ID
}

// Queue makes a job available to the scale set.
func (s *Service) Queue(j Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[j.RequestID] = &job{spec: j, state: jobAvailable}
	s.tell(s.jobMessage("JobAvailable", s.jobs[j.RequestID], nil))
}

// Release lets a held job go to a runner.
func (s *Service) Release(requestID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[requestID]; j != nil {
		j.spec.Hold = false
		s.notify()
	}
}

// Cancel ends a job that has not yet run: it completes as canceled.
func (s *Service) Cancel(requestID int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[requestID]
	if j == nil || j.state == jobRunning || j.state == jobCompleted {
		return fmt.Errorf("job %d is not waiting for a runner", requestID)
	}
	s.complete(j, "canceled")
	return nil
}

// RunnerLost ends the job of a runner that died: GitHub fails it once the
// runner stops answering.
func (s *Service) RunnerLost(runnerName string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runners {
		if j := s.jobs[r.jobID]; r.name == runnerName && j != nil && j.state == jobRunning {
			s.complete(j, "failed")
			return nil
		}
	}
	return fmt.Errorf("runner %s runs no job", runnerName)
}

// Result is a job's state and, once completed, its result.
func (s *Service) Result(requestID int64) (state, result string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[requestID]; j != nil {
		return j.state, j.result
	}
	return "", ""
}

// RunnerOf names the runner a job was given ("" before one took it).
func (s *Service) RunnerOf(requestID int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[requestID]; j != nil && s.runners[j.runnerID] != nil {
		return s.runners[j.runnerID].name
	}
	return ""
}

// Refused counts the removals refused because the runner's job still ran.
func (s *Service) Refused() int { s.mu.Lock(); defer s.mu.Unlock(); return s.refused }

// Registered counts the runners registered and not removed.
func (s *Service) Registered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.runners {
		if !r.removed {
			n++
		}
	}
	return n
}
