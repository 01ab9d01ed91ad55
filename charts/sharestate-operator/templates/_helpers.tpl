{{/*
Names and labels shared by the chart's templates. Each helper takes the chart's top-level context.
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "sharestate-operator.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride, or the release name followed by the chart's
name unless the release name already contains it. At most 63 characters (a DNS label), so that the
longest suffix the chart appends ("-metrics-reader") still leaves a valid object name.
*/}}
{{- define "sharestate-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 48 | trimSuffix "-" }}
{{- else }}
{{- $name := include "sharestate-operator.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 48 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 48 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The chart label's value: name-version. */}}
{{- define "sharestate-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels of every object the chart creates. */}}
{{- define "sharestate-operator.labels" -}}
helm.sh/chart: {{ include "sharestate-operator.chart" . }}
{{ include "sharestate-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The labels that tell this release's objects from another release's. Selectors use them with an
app.kubernetes.io/component label; they must never change, since a Deployment's selector cannot.
*/}}
{{- define "sharestate-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sharestate-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The operator's service account. */}}
{{- define "sharestate-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- .Values.serviceAccount.name | default (include "sharestate-operator.fullname" .) }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
An image reference from an image value (repository, tag, digest): repository@digest when a digest is
set, else repository:tag, the tag defaulting to the chart's appVersion. Takes a dict: "image", the
image value, and "context", the chart's top-level context.
*/}}
{{- define "sharestate-operator.image" -}}
{{- $image := .image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository ($image.tag | default .context.Chart.AppVersion) }}
{{- end }}
{{- end }}
