{{- define "extauthz.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "extauthz.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "extauthz.selectorLabels" -}}
app.kubernetes.io/name: {{ include "extauthz.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "extauthz.labels" -}}
{{ include "extauthz.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "extauthz.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "extauthz.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The configuration file: config with the Redis connection merged in. */}}
{{- define "extauthz.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if .Values.redis.enabled -}}
{{- if not .Values.redis.addrs -}}
{{- fail "redis.enabled needs redis.addrs" -}}
{{- end -}}
{{- $r := dict "addrs" .Values.redis.addrs "tls" .Values.redis.tls "required_for_ready" .Values.redis.requiredForReady -}}
{{- with .Values.redis.username }}{{ $_ := set $r "username" . }}{{ end -}}
{{- if .Values.redis.passwordSecret.name }}{{ $_ := set $r "password_env" "REDIS_PASSWORD" }}{{ end -}}
{{- if .Values.redis.encryptionKeySecret.name }}{{ $_ := set $r "encryption_key_env" "REDIS_TOKEN_KEY" }}{{ end -}}
{{- if .Values.redis.caSecret.name }}{{ $_ := set $r "tls_ca_file" "/etc/extauthz/redis-ca/ca.pem" }}{{ end -}}
{{- $_ := set $cfg "redis" $r -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{- define "extauthz.configMapName" -}}
{{- default (printf "%s-config" (include "extauthz.fullname" .)) .Values.existingConfigMap -}}
{{- end -}}

{{- define "extauthz.adminAddr" -}}
{{- if .Values.listeners.admin.expose -}}
0.0.0.0:{{ .Values.listeners.admin.port }}
{{- else -}}
127.0.0.1:{{ .Values.listeners.admin.port }}
{{- end -}}
{{- end -}}
