{{- define "vault-rollout.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vault-rollout.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "vault-rollout.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vault-rollout.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vault-rollout.labels" -}}
{{ include "vault-rollout.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "vault-rollout.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "vault-rollout.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image; no registry publishes it yet, so there is no default to fall back on. */}}
{{- define "vault-rollout.image" -}}
{{- if not .Values.image.repository -}}
{{- fail "image.repository is required: no registry publishes vault-rollout's image yet. Build it (npm run image), push it to your registry, and install with --set image.repository=REGISTRY/vault-rollout --set image.digest=sha256:... (docs/how-to/install-in-a-cluster.md)" -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Refuses "*" in RBAC rules given through values. */}}
{{- define "vault-rollout.noWildcards" -}}
{{- range $rule := . -}}
{{- range $field := list "apiGroups" "resources" "verbs" "resourceNames" "nonResourceURLs" -}}
{{- range (get $rule $field | default list) -}}
{{- if contains "*" . -}}
{{- fail (printf "rbac.extraRules: %s may not contain a wildcard (%q)" $field .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
