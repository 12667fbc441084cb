{{/*
"true" when the injection runs in the API server, as the MutatingAdmissionPolicy
of injectpolicy.yaml (inject.policy): auto where the server serves
MutatingAdmissionPolicy (GA in 1.36) and not the eviction-request API
(lifecycle.k8s.io/v1alpha1), whose responder entry only the webhook writes.
*/}}
{{- define "runnerguard.injectPolicy" -}}
{{- $mode := toString .Values.inject.policy }}
{{- $served := .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" }}
{{- $responders := .Capabilities.APIVersions.Has "lifecycle.k8s.io/v1alpha1/Eviction" }}
{{- if or (eq $mode "true") (and (eq $mode "auto") $served (not $responders)) }}true{{ end }}
{{- end }}

{{/*
A value as a CEL literal the API server takes as a JSON patch's value: maps'
values wrapped in dyn() so that a map may mix kinds, as JSON does.
*/}}
{{- define "runnerguard.cel" -}}
{{- if kindIs "map" . }}
{{- $parts := list }}
{{- range $k, $v := . }}{{ $parts = append $parts (printf "%q: dyn(%s)" $k (include "runnerguard.cel" $v)) }}{{ end }}
{{- printf "{%s}" (join ", " $parts) }}
{{- else if kindIs "slice" . }}
{{- $parts := list }}
{{- range . }}{{ $parts = append $parts (include "runnerguard.cel" .) }}{{ end }}
{{- printf "[%s]" (join ", " $parts) }}
{{- else if kindIs "string" . }}{{ printf "%q" . }}
{{- else if kindIs "bool" . }}{{ ternary "true" "false" . }}
{{- else if kindIs "float64" . }}{{ if eq . (floor .) }}{{ printf "%d" (int64 .) }}{{ else }}{{ printf "%q" (toString .) }}{{ end }}
{{- else }}{{ printf "%v" . }}
{{- end }}
{{- end }}

{{/*
A Go duration as Go prints it (time.Duration.String): the sidecar's
--interval must read as the injector writes it, so a copy of an
instrumented pod is known for runnerguard's own sidecar.
*/}}
{{- define "runnerguard.goDuration" -}}
{{- $ms := 0.0 }}
{{- range regexFindAll "[0-9.]+(ns|us|µs|ms|s|m|h)" . -1 }}
{{- $n := float64 (regexFind "^[0-9.]+" .) }}
{{- $unit := trimPrefix (regexFind "^[0-9.]+" .) . }}
{{- $ms = addf $ms (mulf $n (get (dict "ns" 0.000001 "us" 0.001 "µs" 0.001 "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0) $unit)) }}
{{- end }}
{{- $ms = int64 (round $ms 0) }}
{{- if lt $ms 1000 }}{{ printf "%dms" $ms }}
{{- else }}
{{- $h := div $ms 3600000 }}{{ $m := div (mod $ms 3600000) 60000 }}{{ $s := div (mod $ms 60000) 1000 }}{{ $frac := mod $ms 1000 }}
{{- $secs := printf "%d" $s }}
{{- if gt $frac 0 }}{{ $secs = printf "%d.%s" $s (trimSuffix "0" (trimSuffix "0" (printf "%03d" $frac))) }}{{ end }}
{{- if gt $h 0 }}{{ printf "%dh%dm%ss" $h $m $secs }}{{ else if gt $m 0 }}{{ printf "%dm%ss" $m $secs }}{{ else }}{{ printf "%ss" $secs }}{{ end }}
{{- end }}
{{- end }}

{{/*
The vitals sidecar as inject.Sidecar builds it for the values, less its
resources (they follow the pod's QoS class) and its readiness probe (left
out on the host's network): both are patched in beside it.
*/}}
{{- define "runnerguard.vitalsSidecar" -}}
{{- $v := .Values.inject.vitals }}
{{- $shared := "/run/runnerguard/vitals" }}
{{- $env := list }}
{{- range list (list "POD_UID" "metadata.uid") (list "POD_NAME" "metadata.name") (list "POD_NAMESPACE" "metadata.namespace") (list "NODE_NAME" "spec.nodeName") }}
{{- $env = append $env (dict "name" (first .) "valueFrom" (dict "fieldRef" (dict "apiVersion" "v1" "fieldPath" (last .)))) }}
{{- end }}
{{- $nonRoot := not $v.oomNotify }}
{{- $uid := ternary 65532 0 $nonRoot }}
{{- $c := dict
  "name" "runnerguard-vitals"
  "image" (default (include "runnerguard.image" .) $v.image)
  "command" (list "/vitals")
  "args" (list "--cgroup-root=/host/cgroup" (printf "--interval=%s" (include "runnerguard.goDuration" $v.interval)) (printf "--out-dir=%s" $shared))
  "env" $env
  "restartPolicy" "Always"
  "terminationMessagePath" "/dev/termination-log"
  "terminationMessagePolicy" "File"
  "volumeMounts" (list (dict "name" "runnerguard-cgroup" "mountPath" "/host/cgroup" "readOnly" $nonRoot) (dict "name" "runnerguard-vitals" "mountPath" $shared))
  "securityContext" (dict "runAsNonRoot" $nonRoot "runAsUser" $uid "runAsGroup" $uid "readOnlyRootFilesystem" true "allowPrivilegeEscalation" false "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault")) }}
{{- with $v.imagePullPolicy }}{{ $_ := set $c "imagePullPolicy" . }}{{ end }}
{{- toJson $c }}
{{- end }}

{{/* The sidecar's readiness probe (inject.withProbe), for a probePort. */}}
{{- define "runnerguard.vitalsProbe" -}}
{{- toJson (dict "httpGet" (dict "path" "/ready" "port" (int64 .) "scheme" "HTTP") "initialDelaySeconds" 5 "timeoutSeconds" 2 "periodSeconds" 5 "successThreshold" 1 "failureThreshold" 1) }}
{{- end }}

{{/*
The creator's record on a runner pod (runnerpod.CreatedBy, CreatedFrom,
CreatedWith), as the injector writes it, as a CEL list of JSON patch
operations on a pod whose annotations exist: the requester's username,
the pod its token is bound to and its credential id, overwriting what the
pod came with. Its variables are runnerguard.creatorVariables.
*/}}
{{- define "runnerguard.creatorPatch" -}}
{{- $keys := fromYaml (include "runnerguard.keys" .) -}}
[JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey({{ $keys.createdBy | quote }}), value: request.userInfo.username},
 JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey({{ $keys.createdFrom | quote }}), value: size(variables.boundPod) == 1 ? variables.boundPod[0] : ""}] +
(size(variables.credential) == 1 ?
  [JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey({{ $keys.createdWith | quote }}), value: variables.credential[0]}] :
  (has(object.metadata.annotations) && {{ $keys.createdWith | quote }} in object.metadata.annotations ?
    [JSONPatch{op: "remove", path: "/metadata/annotations/" + jsonpatch.escapeKey({{ $keys.createdWith | quote }})}] : []))
{{- end }}

{{/* The variables runnerguard.creatorPatch reads. */}}
{{- define "runnerguard.creatorVariables" -}}
- name: credential
  expression: {{ printf "request.userInfo.?extra[?%q].orValue([])" "authentication.kubernetes.io/credential-id" | quote }}
- name: boundPod
  expression: {{ printf "request.userInfo.?extra[?%q].orValue([])" "authentication.kubernetes.io/pod-name" | quote }}
{{- end }}
