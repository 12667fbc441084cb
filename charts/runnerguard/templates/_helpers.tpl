{{/* The chart name, overridable. */}}
{{- define "runnerguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object name. */}}
{{- define "runnerguard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "runnerguard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "runnerguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "runnerguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runnerguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "runnerguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "runnerguard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image of both the webhook and the vitals sidecar. */}}
{{- define "runnerguard.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "runnerguard.servingCertName" -}}
{{ include "runnerguard.fullname" . }}-serving-cert
{{- end }}

{{- define "runnerguard.tlsSecretName" -}}
{{ include "runnerguard.fullname" . }}-tls
{{- end }}

{{/*
The keys of the labels and annotations runnerguard writes or reads on
pods, namespaces and nodes. Read as
(fromYaml (include "runnerguard.keys" .)).runner.
*/}}
{{- define "runnerguard.keys" -}}
runner: runnerguard.io/runner
mode: runnerguard.io/mode
allowDelete: runnerguard.io/allow-delete
createdBy: runnerguard.io/created-by
createdWith: runnerguard.io/created-with
createdFrom: runnerguard.io/created-from
jobAssignedAt: runnerguard.io/job-assigned-at
zombie: runnerguard.io/zombie
refusals: runnerguard.io/refusals
drainDeadline: runnerguard.io/drain-deadline
drainDeadlineBy: runnerguard.io/drain-deadline-by
budget: runnerguard.io/budget
injectBy: runnerguard.io/inject-by
{{- end }}

{{/* A list of strings as a CEL list literal. */}}
{{- define "runnerguard.celList" -}}
{{- $quoted := list }}
{{- range . }}
{{- $quoted = append $quoted (printf "%q" .) }}
{{- end }}
{{- printf "[%s]" (join ", " $quoted) }}
{{- end }}

{{/*
Whether the requester is granted verb on runners.runnerguard.io in the
namespace the CEL expression ns names, as a CEL expression.
*/}}
{{- define "runnerguard.mayCEL" -}}
{{- printf "authorizer.group(%q).resource(%q).namespace(%s).check(%q).allowed()" "runnerguard.io" "runners" .ns .verb }}
{{- end }}

{{/*
A preset's values (.name) as the release (.root) gives them, its
runnerContainers and diagnosticEnv the fleet's defaults (the fleet table's)
where it leaves them out, as JSON: a fleet needs no block in values.yaml.
*/}}
{{- define "runnerguard.preset" -}}
{{- $p := deepCopy (default dict (index .root.Values.presets .name)) }}
{{- range (fromJson (include "runnerguard.presets" .root)).presets }}
{{- if eq .name $.name }}
{{- range $k, $v := .defaults }}
{{- if not (hasKey $p $k) }}{{ $_ := set $p $k $v }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $p }}
{{- end }}

{{/*
Whether a container's name is one of a list of runner containers (names,
and prefixes ended by "*", runnerpod.IsRunnerContainer), as a CEL format
whose %[1]s is the name's expression: `%[1]s in [names]`, or'd with
`%[1]s.startsWith(prefix)` for each prefix.
*/}}
{{- define "runnerguard.containersCEL" -}}
{{- $exact := list }}
{{- $terms := list }}
{{- range . }}
{{- if hasSuffix "*" . }}
{{- $terms = append $terms (printf "%%[1]s.startsWith(%q)" (trimSuffix "*" .)) }}
{{- else }}
{{- $exact = append $exact . }}
{{- end }}
{{- end }}
{{- $terms = prepend $terms (printf "%%[1]s in %s" (include "runnerguard.celList" $exact)) }}
{{- if gt (len $terms) 1 }}{{ printf "(%s)" (join " || " $terms) }}{{ else }}{{ first $terms }}{{ end }}
{{- end }}

{{/*
The enabled presets' runner containers, first seen first, in the order the
webhook matches presets (presets.Order), as runnerguard.containersCEL's
format: the names the server's config (config.RunnerContainerNames) gives.
None enabled: `%[1]s in []`, which no container is, so the webhooks act on
no pod.
*/}}
{{- define "runnerguard.runnerContainersCEL" -}}
{{- $names := list }}
{{- range (fromJson (include "runnerguard.presets" .)).presets }}
{{- if has .name $.Values.presets.enabled }}
{{- $names = concat $names (fromJson (include "runnerguard.preset" (dict "root" $ "name" .name))).runnerContainers }}
{{- end }}
{{- end }}
{{- include "runnerguard.containersCEL" ($names | uniq) }}
{{- end }}

{{/*
The namespaces the webhooks never act in, however labelled, as a label
selector requirement: so no label can ever opt them in.
*/}}
{{- define "runnerguard.neverNamespaces" -}}
{{- $never := list "kube-system" "kube-public" "kube-node-lease" .Release.Namespace .Values.certManager.namespace | uniq }}
{{- toYaml (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" $never) }}
{{- end }}

{{/*
Where both webhooks act: the opt-in selector or the listed namespaces, and
never the system namespaces, the release namespace or cert-manager's. The
pod watcher's --namespace-selector is the same selector.
*/}}
{{- define "runnerguard.namespaceSelector" -}}
{{- $exclude := fromYaml (include "runnerguard.neverNamespaces" .) }}
{{- if .Values.namespaces }}
{{- $in := dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" .Values.namespaces }}
{{- toYaml (dict "matchExpressions" (list $in $exclude)) }}
{{- else }}
{{- $sel := deepCopy .Values.namespaceSelector }}
{{- $_ := set $sel "matchExpressions" (append (default list $sel.matchExpressions) $exclude) }}
{{- toYaml $sel }}
{{- end }}
{{- end }}

{{/*
The namespace selector of mode's registration (enforce or warn): the
webhooks' namespaces whose runnerguard.io/mode label names mode, and, for
the mode guard.rollout names, those whose label names neither. Every
namespace is selected by exactly one of the two, as config.ModeFor reads
the label.
*/}}
{{- define "runnerguard.modeSelector" -}}
{{- $root := .root }}
{{- $sel := fromYaml (include "runnerguard.namespaceSelector" $root) }}
{{- $other := ternary "warn" "enforce" (eq .mode "enforce") }}
{{- $key := (fromYaml (include "runnerguard.keys" $root)).mode }}
{{- $req := dict "key" $key "operator" "In" "values" (list .mode) }}
{{- if eq .mode $root.Values.guard.rollout }}
{{- $req = dict "key" $key "operator" "NotIn" "values" (list $other) }}
{{- end }}
{{- $_ := set $sel "matchExpressions" (append (default list $sel.matchExpressions) $req) }}
{{- toYaml $sel }}
{{- end }}

{{/* How the API server reaches a webhook path: the Service, port 443. */}}
{{- define "runnerguard.clientConfig" -}}
service:
  name: {{ .name }}
  namespace: {{ .namespace }}
  path: {{ .path }}
  port: 443
{{- end }}

{{/*
The same namespace selector as a label selector string, for the pod
watcher's --namespace-selector.
*/}}
{{- define "runnerguard.namespaceSelectorFlag" -}}
{{- $sel := fromYaml (include "runnerguard.namespaceSelector" .) }}
{{- $parts := list }}
{{- range $k, $v := $sel.matchLabels }}
{{- $parts = append $parts (printf "%s=%s" $k $v) }}
{{- end }}
{{- range $sel.matchExpressions }}
{{- if eq .operator "In" }}
{{- $parts = append $parts (printf "%s in (%s)" .key (join "," .values)) }}
{{- else if eq .operator "NotIn" }}
{{- $parts = append $parts (printf "%s notin (%s)" .key (join "," .values)) }}
{{- else if eq .operator "Exists" }}
{{- $parts = append $parts .key }}
{{- else }}
{{- $parts = append $parts (printf "!%s" .key) }}
{{- end }}
{{- end }}
{{- join "," $parts }}
{{- end }}

{{/*
The preset a pod matches, as presets.Match finds it, written in CEL for
the pod .obj ("object" or "oldObject"): the first enabled preset, in
presets.Order, with one of its runner containers and its fleet's marks,
else "". e2e/internal/registration holds it to presets.Match.
*/}}
{{- define "runnerguard.presetOfCEL" -}}
{{- $out := "''" }}
{{- range reverse (fromJson (include "runnerguard.presets" .root)).presets }}
{{- if has .name $.root.Values.presets.enabled }}
{{- $containers := printf (include "runnerguard.containersCEL" (fromJson (include "runnerguard.preset" (dict "root" $.root "name" .name))).runnerContainers) "c.name" }}
{{- $fits := "true" }}
{{- with .fits }}{{ $fits = printf . $.obj }}{{ end }}
{{- $out = printf "%s.spec.containers.exists(c, %s) && (%s) ? %q : %s" $.obj $containers $fits .name $out }}
{{- end }}
{{- end }}
{{- $out }}
{{- end }}

{{/*
"true" when a report destination is on (reports.github, reports.gitlab,
reports.buildkite or a sink); the reporter also needs a namespace or preset
to opt in.
*/}}
{{- define "runnerguard.reports" -}}
{{- $r := .Values.reports -}}
{{- if or $r.github.enabled $r.gitlab.enabled $r.buildkite.enabled $r.sinks -}}true{{- end -}}
{{- end }}

{{/*
The Secrets the reporter reads, as a YAML list; a destination on without
its Secret fails the install.
*/}}
{{- define "runnerguard.reportSecrets" -}}
{{- $r := .Values.reports -}}
{{- $names := list -}}
{{- if $r.github.enabled -}}{{- $names = append $names (required "reports.github.secret: the Secret holding the GitHub App's private key (privateKey)" $r.github.secret) -}}{{- end -}}
{{- if $r.gitlab.enabled -}}{{- $names = append $names (required "reports.gitlab.secret: the Secret holding the GitLab token (token)" $r.gitlab.secret) -}}{{- end -}}
{{- if $r.buildkite.enabled -}}{{- $names = append $names (required "reports.buildkite.secret: the Secret holding the Buildkite API token (token)" $r.buildkite.secret) -}}{{- end -}}
{{- range $r.sinks -}}{{- $names = append $names (required "reports.sinks[].secret: the Secret holding the sink's HMAC key (hmacKey)" .secret) -}}{{- end -}}
{{- toYaml ($names | uniq) -}}
{{- end }}
