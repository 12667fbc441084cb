package fleet

// Chart is what the chart's policies and registrations state of a fleet:
// the CEL form of Fits, the marks that decide its pods' preset, the idle
// signal only its controllers may write. Field names are the chart's.
type Chart struct {
	// Fits is Fits in CEL, the pod's expression as %[1]s; "" for any pod.
	Fits string `json:"fits,omitempty"`
	// Marks decide a pod's preset: a change of their value (or, with
	// Presence, of their presence) is a change of preset.
	Marks []ChartMark `json:"marks,omitempty"`
	// Signal is the mark only the fleet's controllers may change.
	Signal *ChartSignal `json:"signal,omitempty"`
	// NeedsControllers says why the preset cannot run without
	// controllerPrincipals; "" when it can.
	NeedsControllers string `json:"needsControllers,omitempty"`
	// OwnerRecord is the fleet's own object whose DELETE the guard notes,
	// so the pod deletion that follows names who started it; nil for
	// none.
	OwnerRecord *ChartResource `json:"ownerRecord,omitempty"`
	// RecordFinalizer is the finalizer on the fleet's record (OwnerRecord)
	// whose removal from a deleting record says the runner's job is over:
	// only the fleet's controllers may remove it (the chart's record
	// policy, rendered once they are named); nil for none.
	RecordFinalizer *ChartSignal `json:"recordFinalizer,omitempty"`
	// JobMarks: the job's marks on the pod (the preset's job keys) are the
	// fleet's word, which reports trust: the policy keeps them as written
	// at CREATE.
	JobMarks bool `json:"jobMarks,omitempty"`
}

// ChartMark is a mark in CEL (a path on the pod's metadata).
type ChartMark struct {
	Path     string `json:"path"`
	Presence bool   `json:"presence,omitempty"`
}

// ChartSignal is a mark and the refusal's message.
type ChartSignal struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// ChartResource names an API resource for a webhook's rule; Kind, in
// lower case, names the webhook and its path.
type ChartResource struct {
	Kind     string `json:"kind"`
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

// LabelPath and AnnotationPath are a label's or an annotation's optional
// path in CEL, as Chart's marks write them.
const (
	LabelPath      = ".metadata.?labels[?%q]"
	AnnotationPath = ".metadata.?annotations[?%q]"
)
