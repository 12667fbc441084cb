package actionsapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Actions service's paths, under the URL runner-registration names.
const (
	servicePath = "/service/"
	queuePath   = "/queue/"
	// queueToken is the message queue's access token, given with the
	// session.
	queueToken = "rg-queue-token"
)

// Handler serves the GitHub API, the Actions service, the message queue
// and the runners' endpoints.
func (s *Service) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("POST /api/v3/orgs/{org}/actions/runners/registration-token", s.registrationToken)
	m.HandleFunc("POST /api/v3/actions/runner-registration", s.runnerRegistration)
	sets := "/service/_apis/runtime/runnerscalesets"
	m.HandleFunc("GET "+sets, s.admin(s.getScaleSetByName))
	m.HandleFunc("POST "+sets, s.admin(s.createScaleSetHandler))
	m.HandleFunc("GET "+sets+"/{id}", s.admin(s.getScaleSet))
	m.HandleFunc("POST "+sets+"/{id}/sessions", s.admin(s.createSession))
	m.HandleFunc("PATCH "+sets+"/{id}/sessions/{sid}", s.admin(s.createSession))
	m.HandleFunc("DELETE "+sets+"/{id}/sessions/{sid}", s.admin(noContent))
	m.HandleFunc("POST "+sets+"/{id}/acquirejobs", s.queue(s.acquireJobs))
	m.HandleFunc("POST "+sets+"/{id}/generatejitconfig", s.admin(s.generateJitConfig))
	agents := "/service/_apis/distributedtask/pools/0/agents"
	m.HandleFunc("GET "+agents, s.admin(s.getRunnerByName))
	m.HandleFunc("GET "+agents+"/{id}", s.admin(s.getRunner))
	m.HandleFunc("DELETE "+agents+"/{id}", s.admin(s.removeRunner))
	m.HandleFunc("GET "+queuePath+"{id}", s.queue(s.getMessage))
	m.HandleFunc("DELETE "+queuePath+"{id}/{mid}", s.queue(s.deleteMessage))
	m.HandleFunc("GET /runner/job", s.runnerJob)
	m.HandleFunc("POST /runner/done", s.runnerDone)
	return m
}

func (s *Service) registrationToken(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.pat || r.PathValue("org") != s.org {
		http.Error(w, "Bad credentials", http.StatusUnauthorized)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"token": "rg-registration-token", "expires_at": time.Now().Add(time.Hour)})
}

func (s *Service) runnerRegistration(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "RemoteAuth rg-registration-token" {
		http.Error(w, "Bad credentials", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	base := s.base
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"url": base + servicePath, "token": adminToken(time.Now().Add(time.Hour))})
}

// adminToken is a JWT the client reads its expiry from (unverified, as the
// client reads it).
func adminToken(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims := fmt.Sprintf(`{"exp":%d}`, exp.Unix())
	return enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "." + enc([]byte("rg"))
}

// admin requires the admin token runner-registration handed out.
func (s *Service) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") || r.Header.Get("Authorization") == "Bearer "+queueToken {
			http.Error(w, "no admin token", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

// queue requires the message queue's token.
func (s *Service) queue(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+queueToken {
			http.Error(w, "no queue token", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

func (s *Service) getScaleSetByName(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := wireList[wireScaleSet]{}
	for _, set := range s.scaleSets {
		if set.Name == r.URL.Query().Get("name") {
			out.Value = append(out.Value, *set)
		}
	}
	out.Count = len(out.Value)
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) createScaleSetHandler(w http.ResponseWriter, r *http.Request) {
	var set wireScaleSet
	if err := json.NewDecoder(r.Body).Decode(&set); err != nil || set.Name == "" {
		http.Error(w, "a scale set needs a name", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.scaleSets[s.createScaleSet(set)])
}

func (s *Service) getScaleSet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.scaleSets[pathInt(r, "id")]
	if set == nil {
		http.Error(w, "no such scale set", http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, set)
}

func (s *Service) createSession(w http.ResponseWriter, r *http.Request) {
	var in wireSession
	_ = json.NewDecoder(r.Body).Decode(&in)
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.scaleSets[pathInt(r, "id")]
	if set == nil {
		http.Error(w, "no such scale set", http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, wireSession{
		SessionID: "6f2c1a8e-0000-4000-8000-" + fmt.Sprintf("%012d", set.ID), OwnerName: in.OwnerName,
		RunnerScaleSet: set, MessageQueueURL: s.base + queuePath + strconv.Itoa(set.ID),
		MessageQueueAccessToken: queueToken, Statistics: s.stats(),
	})
}

func (s *Service) getMessage(w http.ResponseWriter, r *http.Request) {
	last, _ := strconv.Atoi(r.URL.Query().Get("lastMessageId"))
	m, ok := s.next(r.Context(), last)
	if !ok {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Service) deleteMessage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.drop(pathInt(r, "mid"))
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) acquireJobs(w http.ResponseWriter, r *http.Request) {
	var ids []int64
	if err := json.NewDecoder(r.Body).Decode(&ids); err != nil {
		http.Error(w, "a list of request ids", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.acquire(ids)
	writeJSON(w, http.StatusOK, wireList[int64]{Count: len(got), Value: got})
}

func noContent(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

func pathInt(r *http.Request, name string) int {
	n, _ := strconv.Atoi(r.PathValue(name))
	return n
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeException answers with the service's error body.
func writeException(w http.ResponseWriter, code int, typeName, msg string) {
	writeJSON(w, code, wireException{TypeName: typeName, Message: msg})
}
