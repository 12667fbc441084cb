package actionsapi

import "time"

// The JSON shapes of GitHub's Actions service as ARC's scale-set client
// (github.com/actions/scaleset, which ARC 0.14 uses) reads and writes them.

type wireScaleSet struct {
	ID            int         `json:"id,omitempty"`
	Name          string      `json:"name,omitempty"`
	RunnerGroupID int         `json:"runnerGroupId,omitempty"`
	Labels        []wireLabel `json:"labels,omitempty"`
	Statistics    *wireStats  `json:"statistics,omitempty"`
}

type wireLabel struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type wireStats struct {
	TotalAvailableJobs     int `json:"totalAvailableJobs"`
	TotalAcquiredJobs      int `json:"totalAcquiredJobs"`
	TotalAssignedJobs      int `json:"totalAssignedJobs"`
	TotalRunningJobs       int `json:"totalRunningJobs"`
	TotalRegisteredRunners int `json:"totalRegisteredRunners"`
	TotalBusyRunners       int `json:"totalBusyRunners"`
	TotalIdleRunners       int `json:"totalIdleRunners"`
}

type wireList[T any] struct {
	Count int `json:"count"`
	Value []T `json:"value"`
}

type wireSession struct {
	SessionID               string        `json:"sessionId,omitempty"`
	OwnerName               string        `json:"ownerName,omitempty"`
	RunnerScaleSet          *wireScaleSet `json:"runnerScaleSet,omitempty"`
	MessageQueueURL         string        `json:"messageQueueUrl,omitempty"`
	MessageQueueAccessToken string        `json:"messageQueueAccessToken,omitempty"`
	Statistics              *wireStats    `json:"statistics,omitempty"`
}

// wireMessage is one message of the queue: Body holds the JSON array of
// job messages, as a string.
type wireMessage struct {
	MessageID   int        `json:"messageId"`
	MessageType string     `json:"messageType"`
	Body        string     `json:"body"`
	Statistics  *wireStats `json:"statistics"`
}

// wireJobMessage is each of JobAvailable, JobAssigned, JobStarted and
// JobCompleted: the fields they share and the ones only some carry.
type wireJobMessage struct {
	MessageType      string    `json:"messageType"`
	AcquireJobURL    string    `json:"acquireJobUrl,omitempty"`
	Result           string    `json:"result,omitempty"`
	RunnerID         int       `json:"runnerId,omitempty"`
	RunnerName       string    `json:"runnerName,omitempty"`
	RunnerRequestID  int64     `json:"runnerRequestId"`
	RepositoryName   string    `json:"repositoryName"`
	OwnerName        string    `json:"ownerName"`
	JobID            string    `json:"jobId"`
	JobWorkflowRef   string    `json:"jobWorkflowRef"`
	JobDisplayName   string    `json:"jobDisplayName"`
	WorkflowRunID    int64     `json:"workflowRunId"`
	EventName        string    `json:"eventName"`
	RequestLabels    []string  `json:"requestLabels"`
	QueueTime        time.Time `json:"queueTime"`
	RunnerAssignTime time.Time `json:"runnerAssignTime"`
	FinishTime       time.Time `json:"finishTime"`
}

type wireRunner struct {
	ID               int    `json:"id"`
	Name             string `json:"name"`
	RunnerScaleSetID int    `json:"runnerScaleSetId"`
}

type wireJitConfig struct {
	Runner           *wireRunner `json:"runner"`
	EncodedJITConfig string      `json:"encodedJITConfig"`
}

type wireJitSetting struct {
	Name       string `json:"name"`
	WorkFolder string `json:"workFolder"`
}

// wireException is the service's error body; the client tells the
// errors apart by typeName.
type wireException struct {
	TypeName string `json:"typeName"`
	Message  string `json:"message"`
}

// The exceptions ARC acts on.
const (
	exceptionJobStillRunning = "GitHub.DistributedTask.WebApi.JobStillRunningException, GitHub.DistributedTask.WebApi"
	exceptionAgentNotFound   = "GitHub.DistributedTask.WebApi.AgentNotFoundException, GitHub.DistributedTask.WebApi"
	exceptionAgentExists     = "GitHub.DistributedTask.WebApi.AgentExistsException, GitHub.DistributedTask.WebApi"
)
