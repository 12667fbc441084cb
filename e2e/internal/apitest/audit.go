package apitest

import (
	"bufio"
	"encoding/json"
	"os"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// PolicyDenied is the audit annotation the API server writes when a
// ValidatingAdmissionPolicy binding with the Audit action fails a request.
const PolicyDenied = "validation.policy.admission.k8s.io/validation_failure"

// Audited reads the audit log at path and returns the events match keeps.
func Audited(path string, match func(auditv1.Event) bool) ([]auditv1.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, err
		}
		if match(e) {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}
