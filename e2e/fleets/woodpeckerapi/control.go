package woodpeckerapi

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ServeHTTP is the suite's side of the stand-in, JSON over loopback:
//
//	POST /workflows              a Workflow: queue it; answers its pods by step
//	POST /workflows/{id}/cancel  cancel it
//	GET  /workflows/{id}         its Status
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.Trim(r.URL.Path, "/")
	parts := strings.Split(path, "/")
	switch {
	case r.Method == http.MethodPost && path == "workflows":
		var wf Workflow
		if err := json.NewDecoder(r.Body).Decode(&wf); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		pods, err := s.Add(wf)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, pods)
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "workflows" && parts[2] == "cancel":
		if err := s.Cancel(parts[1]); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "workflows":
		st, ok := s.Status(parts[1])
		if !ok {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, st)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
