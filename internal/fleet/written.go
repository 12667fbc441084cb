package fleet

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WrittenAt is when the status fields of obj were first known written, as
// the API server's own field management dates them: the earliest time of
// the managers that own any of status.<fields>. A manager's time is its
// last write, so a field written once by one manager (ARC's listener
// writes an EphemeralRunner's job once) is dated to that write, and one
// another manager wrote again since is dated no earlier than it was: the
// date is never before the field's first write. False when no manager
// owns them or none is dated.
func WrittenAt(obj metav1.Object, fields ...string) (time.Time, bool) {
	var at time.Time
	for _, e := range obj.GetManagedFields() {
		if e.Time == nil || !OwnsStatus(e, fields) {
			continue
		}
		if at.IsZero() || e.Time.Before(&metav1.Time{Time: at}) {
			at = e.Time.Time
		}
	}
	return at, !at.IsZero()
}

// OwnsStatus reports whether the managed-fields entry e owns any of
// status.<fields>.
func OwnsStatus(e metav1.ManagedFieldsEntry, fields []string) bool {
	if e.FieldsV1 == nil {
		return false
	}
	var set, status map[string]json.RawMessage
	if json.Unmarshal(e.FieldsV1.Raw, &set) != nil || json.Unmarshal(set["f:status"], &status) != nil {
		return false
	}
	for _, f := range fields {
		if _, ok := status["f:"+f]; ok {
			return true
		}
	}
	return false
}
