{{/* Names ----------------------------------------------------------------------- */}}

{{- define "ember.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ember.fullname" -}}
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

{{- define "ember.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ember.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ember.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels: call with (dict "ctx" $ "component" "querier") ------------------------- */}}

{{- define "ember.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ember.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ember.labels" -}}
helm.sh/chart: {{ include "ember.chart" .ctx }}
{{ include "ember.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: ember
{{- end -}}

{{- define "ember.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | toString) -}}
{{- end -}}

{{- define "ember.bin" -}}
{{- printf "%s/%s" (.ctx.Values.image.binDir | trimSuffix "/") .name -}}
{{- end -}}

{{/* Service DNS names ---------------------------------------------------------------- */}}

{{- define "ember.svcHost" -}}
{{- printf "%s.%s.svc.%s" .name .ctx.Release.Namespace .ctx.Values.clusterDomain -}}
{{- end -}}

{{- define "ember.querierService" -}}{{ include "ember.fullname" . }}-querier{{- end -}}
{{- define "ember.ingestService" -}}{{ include "ember.fullname" . }}-ingest{{- end -}}

{{/* Redis ------------------------------------------------------------------------------ */}}

{{/* "true" when the release needs Redis: microservices, or the agent (it publishes to Redis). */}}
{{- define "ember.redisUsed" -}}
{{- if or (eq .Values.mode "microservices") .Values.agent.enabled -}}true{{- end -}}
{{- end -}}

{{- define "ember.redisName" -}}{{ include "ember.fullname" . }}-redis{{- end -}}

{{/* The env entry every ember container gets: the same Redis URL everywhere. */}}
{{- define "ember.redisEnv" -}}
{{- if include "ember.redisUsed" . }}
- name: EMBER_REDIS_URL
{{- if .Values.redis.enabled }}
  value: {{ printf "redis://%s:%d" (include "ember.svcHost" (dict "ctx" . "name" (include "ember.redisName" .))) (int .Values.redis.port) | quote }}
{{- else if .Values.redis.existingSecret }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.existingSecret }}
      key: {{ .Values.redis.existingSecretKey }}
{{- else }}
  value: {{ required "redis.enabled=false needs redis.url or redis.existingSecret" .Values.redis.url | quote }}
{{- end }}
{{- if .Values.redis.cluster.enabled }}
{{- if .Values.redis.enabled }}
{{- fail "redis.cluster.enabled needs an external cluster: redis.enabled=false and its seed nodes in redis.url" }}
{{- end }}
- name: EMBER_REDIS_CLUSTER
  value: "true"
{{- end }}
{{- end }}
{{- end -}}

{{/* --redis.wait-replicas, for the publishers that take it (ember-ingester, ember-scraper,
ember-agent; `ember` and ember-querier have no such flag). */}}
{{- define "ember.waitReplicasEnv" -}}
{{- if and (include "ember.redisUsed" .) .Values.redis.waitReplicas }}
- name: EMBER_REDIS_WAIT_REPLICAS
  value: {{ .Values.redis.waitReplicas | int | quote }}
{{- end }}
{{- end -}}

{{/* Environment of every ember container: the downward API + Redis + extraEnv. */}}
{{- define "ember.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- include "ember.redisEnv" . }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Flags ------------------------------------------------------------------------------ */}}

{{/* A map {flag: value} as args: --flag=value. */}}
{{- define "ember.mapArgs" -}}
{{- range $k, $v := . }}
- {{ printf "--%s=%v" $k $v | quote }}
{{- end }}
{{- end -}}

{{- define "ember.commonArgs" -}}
- --http.address=0.0.0.0:{{ .Values.service.port }}
- --log.level={{ .Values.logLevel }}
{{- if .Values.multitenancy.enabled }}
- --auth.multitenancy-enabled=true
{{- end }}
- --http.max-body-bytes={{ .Values.limits.maxBodyBytes }}
{{- end -}}

{{/* Storage, retention and ingest limits: ember and ember-ingester. */}}
{{- define "ember.storeArgs" -}}
- --data.dir=/data
- --retention={{ .Values.retention }}
- --storage.block-duration={{ .Values.storage.blockDuration }}
- --storage.map-size={{ .Values.storage.mapSize }}
- --ingest.max-profile-bytes={{ .Values.limits.maxProfileBytes }}
- --ingest.max-samples={{ int64 .Values.limits.maxSamples }}
- --ingest.reject-older-than={{ .Values.limits.rejectOlderThan }}
- --ingest.reject-newer-than={{ .Values.limits.rejectNewerThan }}
- --ingest.max-backlog-bytes={{ .Values.limits.maxBacklogBytes }}
{{- include "ember.bucketArgs" . }}
{{- if .Values.storage.backend }}
- --storage.local-retention={{ .Values.storage.localRetention }}
{{- end }}
{{- end -}}

{{/* Object storage of closed blocks (--storage.backend): ember and ember-ingester. */}}
{{- define "ember.bucketArgs" -}}
{{- with .Values.storage }}
{{- if .backend }}
- --storage.backend={{ .backend }}
{{- with .prefix }}
- --storage.prefix={{ . }}
{{- end }}
{{- if eq .backend "s3" }}
- --storage.s3.endpoint={{ required "storage.backend=s3 needs storage.s3.endpoint" .s3.endpoint }}
- --storage.s3.bucket-name={{ required "storage.backend=s3 needs storage.s3.bucketName" .s3.bucketName }}
{{- with .s3.region }}
- --storage.s3.region={{ . }}
{{- end }}
- --storage.s3.insecure={{ .s3.insecure }}
- --storage.s3.force-path-style={{ .s3.forcePathStyle }}
{{- else }}
- --storage.filesystem.dir={{ required "storage.backend=filesystem needs storage.filesystem.dir" .filesystem.dir }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The S3 credentials from an existing Secret, as the AWS_* variables the binaries read. */}}
{{- define "ember.bucketEnv" -}}
{{- with .Values.storage }}
{{- if and (eq .backend "s3") .s3.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ .s3.existingSecret }}
      key: {{ .s3.accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .s3.existingSecret }}
      key: {{ .s3.secretAccessKeyKey }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Redis-stream flags of a consumer (ember, ember-ingester). */}}
{{- define "ember.streamArgs" -}}
- --ingest.partitions={{ int .Values.ingest.partitions }}
- --redis.max-backlog={{ int .Values.ingest.maxBacklog }}
- --redis.claim-idle={{ .Values.ingest.claimIdle }}
- --redis.publish-retry={{ .Values.ingest.publishRetry }}
- --ingester.id=$(POD_NAME)
{{- end -}}

{{/* Publisher flags (ember-scraper, ember-agent). */}}
{{- define "ember.publisherArgs" -}}
- --log.level={{ .Values.logLevel }}
- --ingest.partitions={{ int .Values.ingest.partitions }}
- --redis.publish-retry={{ .Values.ingest.publishRetry }}
- --tenant={{ .Values.multitenancy.tenant }}
{{- end -}}

{{/* Pod pieces --------------------------------------------------------------------------- */}}

{{- define "ember.probes" -}}
readinessProbe:
  {{- toYaml .Values.readinessProbe | nindent 2 }}
livenessProbe:
  {{- toYaml .Values.livenessProbe | nindent 2 }}
{{- end -}}

{{- define "ember.podCommon" -}}
serviceAccountName: {{ include "ember.serviceAccountName" . }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "ember.checksum" -}}
checksum/values: {{ toJson (pick .Values "logLevel" "retention" "storage" "multitenancy" "limits" "ingest" "extraArgs" "extraEnv" "redis") | sha256sum | trunc 16 }}
{{- end -}}
