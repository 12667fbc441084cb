package inject

import (
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// patch is the injector's answer built as Mutate changes the pod: each
// change is made to the decoded pod and written down as the JSON patch
// operation that makes the same change to the pod the API server sent.
// Diffing the whole pod before and after (jsonpatch.CreatePatch) parses
// both into generic maps, most of a large review's allocations, to find
// the few places the injector writes; here those places are known as they
// are written.
//
// The operations address the raw pod by the decoded pod's paths, which
// are the raw pod's: decoding keeps every list's order and length and
// every map's keys. The only values added are the injector's own (the
// sidecar, its volumes and mounts, the preset's env, strings), and nothing
// else of the raw pod is rewritten, so fields this build's Pod type does
// not know (an API server newer than the webhook) stay where they are. A
// list or map the decoded pod has empty is written whole, so its raw form
// (absent, null or empty) does not matter. The objects the paths go
// through (metadata, spec, each container) are always objects in the API
// server's encoding of a pod, never null.
//
// A nil *patch records nothing: Mutate changes the pod alone.
type patch struct {
	ops []jsonpatch.Operation
}

func (p *patch) add(path string, value any) {
	if p != nil {
		p.ops = append(p.ops, jsonpatch.NewOperation("add", path, value))
	}
}

func (p *patch) remove(path string) {
	if p != nil {
		p.ops = append(p.ops, jsonpatch.NewOperation("remove", path, nil))
	}
}

// changed reports whether anything was written: setting what a pod
// already has writes nothing.
func (p *patch) changed() bool { return len(p.ops) > 0 }

// response allows the pod with the patch.
func (p *patch) response() admission.Response {
	if !p.changed() {
		return admission.Allowed("")
	}
	pt := admissionv1.PatchTypeJSONPatch
	return admission.Response{
		Patches:           p.ops,
		AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt},
	}
}

// pointerEscaper escapes a map key as one JSON pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// setKey sets (*m)[key] to value; path is the map's in the pod.
func setKey(p *patch, m *map[string]string, path, key, value string) {
	if old, ok := (*m)[key]; ok && old == value {
		return
	}
	if len(*m) == 0 {
		*m = map[string]string{key: value}
		p.add(path, map[string]string{key: value})
		return
	}
	(*m)[key] = value
	p.add(path+"/"+pointerEscaper.Replace(key), value)
}

// deleteKey deletes key from m; path is the map's in the pod.
func deleteKey(p *patch, m map[string]string, path, key string) {
	if _, ok := m[key]; !ok {
		return
	}
	delete(m, key)
	p.remove(path + "/" + pointerEscaper.Replace(key))
}

// appendItem appends v to *s; path is the list's in the pod.
func appendItem[T any](p *patch, s *[]T, path string, v T) {
	if len(*s) == 0 {
		p.add(path, []T{v})
	} else {
		p.add(path+"/-", v)
	}
	*s = append(*s, v)
}

// insertFirst puts v first in *s; path is the list's in the pod.
func insertFirst[T any](p *patch, s *[]T, path string, v T) {
	if len(*s) == 0 {
		p.add(path, []T{v})
	} else {
		p.add(path+"/0", v)
	}
	*s = slices.Insert(*s, 0, v)
}

// setField sets *f to v; path is the field's in the pod.
func setField[T comparable](p *patch, f *T, path string, v T) {
	if *f == v {
		return
	}
	*f = v
	p.add(path, v)
}

// containerPath is the path of the i-th of the pod's containers.
func containerPath(i int) string { return "/spec/containers/" + strconv.Itoa(i) }
