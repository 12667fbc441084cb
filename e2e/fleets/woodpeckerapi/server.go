// Package woodpeckerapi is a stand-in for the Woodpecker server's agent API
// (go.woodpecker-ci.org/woodpecker/v3 rpc/proto: the Woodpecker and
// WoodpeckerAuth gRPC services), enough for a real Woodpecker agent to take
// workflows of commands steps and report them. It is held to the real
// proto: the services are the generated ones of the Woodpecker source the
// agent is built from (hack/fleets/woodpecker.sh), which is why this is a
// module of its own with that source as a local replace.
//
// A workflow is handed out as the server hands it (server/rpc/server.go):
// its id, its timeout in minutes and its pipeline/backend/types.Config as
// JSON, each step in a stage of its own with the labels and environment
// the server's compiler gives a commands step. Clone is off (no clone
// step) and steps mount no workspace volume: the cluster has no storage
// provisioner, and the workflow's claim would stay Pending.
// A cancel is answered the way the server answers it: the agent's pending
// Wait returns canceled.
package woodpeckerapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	backend "go.woodpecker-ci.org/woodpecker/v3/pipeline/backend/types"
	"go.woodpecker-ci.org/woodpecker/v3/rpc/proto"
)

// Workflow is a workflow to hand out: steps of shell commands in Repo
// (owner/name), under a timeout in minutes (0: the agent's hour).
type Workflow struct {
	ID             string `json:"id"`
	Repo           string `json:"repo"`
	TimeoutMinutes int64  `json:"timeoutMinutes"`
	Steps          []Step `json:"steps"`
}

// Step is one commands step; MemoryLimit, when set, goes in the step's
// Kubernetes backend options as resources.limits.memory.
type Step struct {
	Name        string   `json:"name"`
	Image       string   `json:"image"`
	Commands    []string `json:"commands"`
	MemoryLimit string   `json:"memoryLimit,omitempty"`
}

// Status is what the agent reported of a workflow.
type Status struct {
	Taken       bool         `json:"taken"`
	Initialized bool         `json:"initialized"`
	Done        bool         `json:"done"`
	CancelSent  bool         `json:"cancelSent"`
	Started     int64        `json:"started"`
	Finished    int64        `json:"finished"`
	Canceled    bool         `json:"canceled"`
	Error       string       `json:"error"`
	Steps       []StepStatus `json:"steps"`
}

// StepStatus is a step's last reported state and its log.
type StepStatus struct {
	Name     string `json:"name"`
	UUID     string `json:"uuid"`
	Pod      string `json:"pod"` // the backend's pod name: wp-<uuid, lower case>
	Updates  int    `json:"updates"`
	Started  int64  `json:"started"`
	Finished int64  `json:"finished"`
	Exited   bool   `json:"exited"`
	ExitCode int32  `json:"exitCode"`
	Error    string `json:"error"`
	Canceled bool   `json:"canceled"`
	Skipped  bool   `json:"skipped"`
	Log      string `json:"log"`
}

type workflow struct {
	spec   Workflow
	config *backend.Config
	status Status
	cancel chan struct{} // closed on a cancel
	done   chan struct{} // closed on Done
	byUUID map[string]int
}

// Server serves both gRPC services.
type Server struct {
	proto.UnimplementedWoodpeckerServer
	proto.UnimplementedWoodpeckerAuthServer

	agentToken  string
	accessToken string

	mu        sync.Mutex
	queue     []string
	queued    chan struct{} // signalled on Add
	workflows map[string]*workflow
	agents    int64
}

// New returns a server that accepts agentToken (WOODPECKER_AGENT_SECRET).
func New(agentToken string) *Server {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return &Server{agentToken: agentToken, accessToken: "standin-" + hex.EncodeToString(b),
		queued: make(chan struct{}, 1), workflows: map[string]*workflow{}}
}

// Register puts both services on g, with the server's check of the access
// token on every Woodpecker call (server/rpc/authorizer.go: metadata
// "token").
func (s *Server) Register(g *grpc.Server) {
	proto.RegisterWoodpeckerServer(g, s)
	proto.RegisterWoodpeckerAuthServer(g, s)
}

// Interceptor refuses a Woodpecker call without the access token Auth
// gave out, as the server does (codes.Unauthenticated).
func (s *Server) Interceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, "/proto.WoodpeckerAuth/") {
			return h(ctx, req)
		}
		md, _ := metadata.FromIncomingContext(ctx)
		if t := md.Get("token"); len(t) == 0 || t[0] != s.accessToken {
			return nil, status.Error(codes.Unauthenticated, "invalid token")
		}
		return h(ctx, req)
	}
}

// Add queues w for the next agent that asks, and returns its step pods'
// names by step.
func (s *Server) Add(w Workflow) (map[string]string, error) {
	conf, err := Config(w)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.workflows[w.ID]; ok {
		return nil, fmt.Errorf("workflow %s exists", w.ID)
	}
	wf := &workflow{spec: w, config: conf, cancel: make(chan struct{}), done: make(chan struct{}),
		byUUID: map[string]int{}}
	pods := map[string]string{}
	for i, st := range conf.Stages {
		step := st.Steps[0]
		pod := "wp-" + strings.ToLower(step.UUID)
		wf.status.Steps = append(wf.status.Steps, StepStatus{Name: step.Name, UUID: step.UUID, Pod: pod})
		wf.byUUID[step.UUID] = i
		pods[step.Name] = pod
	}
	s.workflows[w.ID] = wf
	s.queue = append(s.queue, w.ID)
	select {
	case s.queued <- struct{}{}:
	default:
	}
	return pods, nil
}

// Cancel cancels workflow id: the agent's Wait returns canceled.
func (s *Server) Cancel(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	wf := s.workflows[id]
	if wf == nil {
		return fmt.Errorf("no workflow %s", id)
	}
	if !wf.status.CancelSent {
		wf.status.CancelSent = true
		close(wf.cancel)
	}
	return nil
}

// Status is workflow id's status so far.
func (s *Server) Status(id string) (Status, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wf := s.workflows[id]
	if wf == nil {
		return Status{}, false
	}
	st := wf.status
	st.Steps = append([]StepStatus(nil), st.Steps...)
	return st, true
}

// CommitSHA and RepoForgeID are every workflow's commit and its
// repository's id on the forge (GitHub's numbering).
const (
	CommitSHA   = "9fceb02d0ae598e95dc970b74767f19372d61af8"
	RepoForgeID = "700123"
)

// Config is the workflow's backend config as the server's compiler makes
// it of commands steps with clone off: one stage per step.
func Config(w Workflow) (*backend.Config, error) {
	if w.ID == "" || w.Repo == "" || len(w.Steps) == 0 {
		return nil, errors.New("a workflow needs an id, a repo and steps")
	}
	owner, name, _ := strings.Cut(w.Repo, "/")
	prefix := "wp_" + ulid.Make().String()
	conf := &backend.Config{Volume: prefix + "_default:/woodpecker", Network: prefix + "_default"}
	for _, s := range w.Steps {
		env := map[string]string{
			"CI": "woodpecker", "CI_REPO": w.Repo, "CI_REPO_OWNER": owner, "CI_REPO_NAME": name,
			"CI_PIPELINE_NUMBER": w.ID, "CI_WORKFLOW_NAME": "build", "CI_STEP_NAME": s.Name,
			"CI_WORKSPACE": "/woodpecker/src/example.org/" + w.Repo,
			// The commit and the forge as the metadata's environ writes them.
			"CI_COMMIT_SHA": CommitSHA, "CI_COMMIT_REF": "refs/heads/main", "CI_FORGE_TYPE": "github", "CI_FORGE_URL": "https://github.com",
			"CI_STEP_URL": "https://woodpecker.example.org/repos/1/pipeline/" + w.ID,
		}
		step := &backend.Step{
			Name: s.Name, UUID: ulid.Make().String(), Type: backend.StepTypeCommands, Image: s.Image,
			WorkspaceBase: "/woodpecker", WorkingDir: "/woodpecker/src/example.org/" + w.Repo,
			Environment: env, Commands: s.Commands, OnSuccess: true, Failure: "fail",
			Networks: []backend.Conn{{Name: prefix + "_default", Aliases: []string{s.Name}}},
			WorkflowLabels: map[string]string{
				// The server stamps the forge's type under forge-id
				// (pipeline/frontend/builder/builder.go, v3.17.0).
				"woodpecker-ci.org/forge-id": "github", "woodpecker-ci.org/repo-forge-id": RepoForgeID,
				"woodpecker-ci.org/repo-id": "1", "woodpecker-ci.org/repo-name": name,
				"woodpecker-ci.org/repo-full-name": w.Repo, "woodpecker-ci.org/branch": "main",
				"woodpecker-ci.org/org-id": "1", "woodpecker-ci.org/event": "push",
			},
		}
		if s.MemoryLimit != "" {
			step.BackendOptions = map[string]any{"kubernetes": map[string]any{
				"resources": map[string]any{"limits": map[string]any{"memory": s.MemoryLimit}},
			}}
		}
		conf.Stages = append(conf.Stages, &backend.Stage{Steps: []*backend.Step{step}})
	}
	return conf, nil
}

// Auth hands the access token to an agent with the agent token.
func (s *Server) Auth(_ context.Context, req *proto.AuthRequest) (*proto.AuthResponse, error) {
	if req.GetAgentToken() != s.agentToken {
		return nil, status.Error(codes.Unauthenticated, "invalid agent token")
	}
	id := req.GetAgentId()
	if id <= 0 {
		s.mu.Lock()
		s.agents++
		id = s.agents
		s.mu.Unlock()
	}
	return &proto.AuthResponse{Status: "ok", AgentId: id, AccessToken: s.accessToken}, nil
}

// Version is the proto version the agent was built with.
func (s *Server) Version(context.Context, *proto.Empty) (*proto.VersionResponse, error) {
	return &proto.VersionResponse{GrpcVersion: proto.Version, ServerVersion: "standin"}, nil
}

// Next hands out the next queued workflow, waiting for one up to 30s (the
// server holds the call until a workflow fits).
func (s *Server) Next(ctx context.Context, _ *proto.NextRequest) (*proto.NextResponse, error) {
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			wf := s.workflows[s.queue[0]]
			s.queue = s.queue[1:]
			if len(s.queue) > 0 {
				select {
				case s.queued <- struct{}{}:
				default:
				}
			}
			wf.status.Taken = true
			s.mu.Unlock()
			payload, err := json.Marshal(wf.config)
			if err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			return &proto.NextResponse{Workflow: &proto.Workflow{Id: wf.spec.ID, Timeout: wf.spec.TimeoutMinutes, Payload: payload}}, nil
		}
		s.mu.Unlock()
		select {
		case <-s.queued:
		case <-deadline:
			return &proto.NextResponse{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *Server) workflow(id string) (*workflow, error) {
	wf := s.workflows[id]
	if wf == nil {
		return nil, status.Errorf(codes.NotFound, "no workflow %s", id)
	}
	return wf, nil
}

// Init records the workflow's start.
func (s *Server) Init(_ context.Context, req *proto.InitRequest) (*proto.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wf, err := s.workflow(req.GetId())
	if err != nil {
		return nil, err
	}
	wf.status.Initialized = true
	wf.status.Started = req.GetState().GetStarted()
	return &proto.Empty{}, nil
}

// Wait returns canceled on a cancel, not canceled once the workflow is
// done.
func (s *Server) Wait(ctx context.Context, req *proto.WaitRequest) (*proto.WaitResponse, error) {
	s.mu.Lock()
	wf, err := s.workflow(req.GetId())
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case <-wf.cancel:
		return &proto.WaitResponse{Canceled: true}, nil
	case <-wf.done:
		return &proto.WaitResponse{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done records the workflow's end.
func (s *Server) Done(_ context.Context, req *proto.DoneRequest) (*proto.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wf, err := s.workflow(req.GetId())
	if err != nil {
		return nil, err
	}
	st := req.GetState()
	if !wf.status.Done {
		close(wf.done)
	}
	wf.status.Done = true
	wf.status.Finished, wf.status.Canceled, wf.status.Error = st.GetFinished(), st.GetCanceled(), st.GetError()
	return &proto.Empty{}, nil
}

// Extend renews nothing: the stand-in keeps no leases.
func (s *Server) Extend(_ context.Context, req *proto.ExtendRequest) (*proto.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.workflow(req.GetId()); err != nil {
		return nil, err
	}
	return &proto.Empty{}, nil
}

// Update records a step's state.
func (s *Server) Update(_ context.Context, req *proto.UpdateRequest) (*proto.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wf, err := s.workflow(req.GetId())
	if err != nil {
		return nil, err
	}
	st := req.GetState()
	i, ok := wf.byUUID[st.GetStepUuid()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no step %s in workflow %s", st.GetStepUuid(), req.GetId())
	}
	ss := &wf.status.Steps[i]
	ss.Updates++
	ss.Started, ss.Finished, ss.Exited, ss.ExitCode = st.GetStarted(), st.GetFinished(), st.GetExited(), st.GetExitCode()
	ss.Error, ss.Canceled, ss.Skipped = st.GetError(), st.GetCanceled(), st.GetSkipped()
	return &proto.Empty{}, nil
}

// Log appends the entries' data to their steps' logs.
func (s *Server) Log(_ context.Context, req *proto.LogRequest) (*proto.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range req.GetLogEntries() {
		for _, wf := range s.workflows {
			if i, ok := wf.byUUID[e.GetStepUuid()]; ok {
				wf.status.Steps[i].Log += string(e.GetData()) + "\n"
			}
		}
	}
	return &proto.Empty{}, nil
}

// RegisterAgent gives the agent its id.
func (s *Server) RegisterAgent(context.Context, *proto.RegisterAgentRequest) (*proto.RegisterAgentResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agents == 0 {
		s.agents = 1
	}
	return &proto.RegisterAgentResponse{AgentId: s.agents}, nil
}

// UnregisterAgent is taken.
func (s *Server) UnregisterAgent(context.Context, *proto.Empty) (*proto.Empty, error) {
	return &proto.Empty{}, nil
}

// ReportHealth is taken.
func (s *Server) ReportHealth(context.Context, *proto.ReportHealthRequest) (*proto.Empty, error) {
	return &proto.Empty{}, nil
}
