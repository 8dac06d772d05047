{{/* The chart's name. */}}
{{- define "karpenter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The fullname: the release name, unless it lacks the chart's name. */}}
{{- define "karpenter.fullname" -}}
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

{{/* The labels that select the controller's pods. */}}
{{- define "karpenter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "karpenter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "karpenter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* `annotations:` of every object's metadata (indented for it), or nothing. */}}
{{- define "karpenter.annotations" -}}
{{- with .Values.additionalAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end }}

{{/* The ServiceAccount's name. */}}
{{- define "karpenter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpenter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The controller image: repository:tag, or repository@digest. */}}
{{- define "karpenter.image" -}}
{{- $img := .Values.controller.image }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/* FEATURE_GATES from settings.featureGates (upstream's gate names). */}}
{{- define "karpenter.featureGates" -}}
{{- $g := .Values.settings.featureGates }}
{{- printf "NodeRepair=%t,ReservedCapacity=%t,SpotToSpotConsolidation=%t,NodeOverlay=%t,StaticCapacity=%t" $g.nodeRepair $g.reservedCapacity $g.spotToSpotConsolidation $g.nodeOverlay $g.staticCapacity }}
{{- end }}

{{/*
The controller's environment: the settings as the variables `karpenter controller` reads, then
controller.env. A controller.env entry named like a setting's variable replaces the setting
(upstream values files set CLUSTER_NAME and friends there), so no name appears twice.
*/}}
{{- define "karpenter.env" -}}
{{- $v := .Values }}
{{- include "karpenter.unsupported" . }}
{{- if and (eq $v.settings.cloudProvider "aws") (not $v.settings.clusterName) }}
{{- $fromEnv := false }}
{{- range $v.controller.env }}{{ if eq .name "CLUSTER_NAME" }}{{ $fromEnv = true }}{{ end }}{{ end }}
{{- if not $fromEnv }}
{{- fail "settings.clusterName is required with settings.cloudProvider=aws (the EKS cluster's name, e.g. --set settings.clusterName=my-cluster)" }}
{{- end }}
{{- end }}
{{- $user := dict }}
{{- range $v.controller.env }}{{ $_ := set $user .name true }}{{ end }}
{{- $settings := list
  (dict "name" "CLOUD_PROVIDER" "value" $v.settings.cloudProvider)
  (dict "name" "CLUSTER_NAME" "value" $v.settings.clusterName)
  (dict "name" "CLUSTER_ENDPOINT" "value" $v.settings.clusterEndpoint)
  (dict "name" "INTERRUPTION_QUEUE" "value" $v.settings.interruptionQueue)
  (dict "name" "BATCH_IDLE_DURATION" "value" $v.settings.batchIdleDuration)
  (dict "name" "BATCH_MAX_DURATION" "value" $v.settings.batchMaxDuration)
  (dict "name" "FEATURE_GATES" "value" (include "karpenter.featureGates" .))
  (dict "name" "PREFERENCE_POLICY" "value" $v.settings.preferencePolicy)
  (dict "name" "MIN_VALUES_POLICY" "value" $v.settings.minValuesPolicy)
  (dict "name" "CLUSTER_CA_BUNDLE" "value" $v.settings.clusterCABundle)
  (dict "name" "ISOLATED_VPC" "value" (toString $v.settings.isolatedVPC))
  (dict "name" "VM_MEMORY_OVERHEAD_PERCENT" "value" (toString $v.settings.vmMemoryOverheadPercent))
  (dict "name" "RESERVED_ENIS" "value" (toString $v.settings.reservedENIs))
  (dict "name" "DISABLE_CLUSTER_STATE_OBSERVABILITY" "value" (toString $v.settings.disableClusterStateObservability))
  (dict "name" "DISABLE_DRY_RUN" "value" (toString $v.settings.disableDryRun))
  (dict "name" "LOG_LEVEL" "value" $v.logLevel)
  (dict "name" "METRICS_PORT" "value" (toString $v.controller.metrics.port))
  (dict "name" "HEALTH_PROBE_PORT" "value" (toString $v.controller.healthProbe.port))
}}
{{- range $settings }}
{{- if not (hasKey $user .name) }}
- name: {{ .name }}
  value: {{ .value | quote }}
{{- end }}
{{- end }}
{{- if not (hasKey $user "SYSTEM_NAMESPACE") }}
- name: SYSTEM_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}
{{- if not (hasKey $user "POD_NAME") }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}
{{- with $v.controller.env }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* A pod affinity term with this release's selector when it has no labelSelector. */}}
{{- define "karpenter.withSelector" -}}
{{- $term := deepCopy .term }}
{{- if not (hasKey $term "labelSelector") }}
{{- $_ := set $term "labelSelector" (dict "matchLabels" (include "karpenter.selectorLabels" .root | fromYaml)) }}
{{- end }}
{{- toJson $term }}
{{- end }}

{{/*
The pods' affinity: the affinity value, with `karpenter.sh/nodepool DoesNotExist` in every
required node selector term (the controller never runs on a node Karpenter manages), and this
release's selector in every pod (anti-)affinity term that has none.
*/}}
{{- define "karpenter.affinity" -}}
{{- $root := . }}
{{- $aff := deepCopy (.Values.affinity | default dict) }}
{{- $na := get $aff "nodeAffinity" | default dict }}
{{- $req := get $na "requiredDuringSchedulingIgnoredDuringExecution" | default dict }}
{{- $terms := list }}
{{- range (get $req "nodeSelectorTerms" | default (list (dict))) }}
{{- $t := deepCopy . }}
{{- $exprs := get $t "matchExpressions" | default list }}
{{- $has := false }}
{{- range $exprs }}
{{- if and (eq .key "karpenter.sh/nodepool") (eq .operator "DoesNotExist") }}{{ $has = true }}{{ end }}
{{- end }}
{{- if not $has }}
{{- $exprs = append $exprs (dict "key" "karpenter.sh/nodepool" "operator" "DoesNotExist") }}
{{- end }}
{{- $_ := set $t "matchExpressions" $exprs }}
{{- $terms = append $terms $t }}
{{- end }}
{{- $_ := set $req "nodeSelectorTerms" $terms }}
{{- $_ := set $na "requiredDuringSchedulingIgnoredDuringExecution" $req }}
{{- $_ := set $aff "nodeAffinity" $na }}
{{- range $kind := list "podAffinity" "podAntiAffinity" }}
{{- with get $aff $kind }}
{{- $pa := . }}
{{- $required := list }}
{{- range (get $pa "requiredDuringSchedulingIgnoredDuringExecution" | default list) }}
{{- $required = append $required (include "karpenter.withSelector" (dict "root" $root "term" .) | fromJson) }}
{{- end }}
{{- if $required }}{{ $_ := set $pa "requiredDuringSchedulingIgnoredDuringExecution" $required }}{{ end }}
{{- $preferred := list }}
{{- range (get $pa "preferredDuringSchedulingIgnoredDuringExecution" | default list) }}
{{- $w := deepCopy . }}
{{- $_ := set $w "podAffinityTerm" (include "karpenter.withSelector" (dict "root" $root "term" (get $w "podAffinityTerm" | default dict)) | fromJson) }}
{{- $preferred = append $preferred $w }}
{{- end }}
{{- if $preferred }}{{ $_ := set $pa "preferredDuringSchedulingIgnoredDuringExecution" $preferred }}{{ end }}
{{- end }}
{{- end }}
{{- toYaml $aff }}
{{- end }}

{{/* The topology spread constraints, with this release's selector where none is given. */}}
{{- define "karpenter.topologySpreadConstraints" -}}
{{- $out := list }}
{{- range .Values.topologySpreadConstraints }}
{{- $out = append $out (include "karpenter.withSelector" (dict "root" $ "term" .) | fromJson) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
Upstream values this controller accepts only at upstream's default, because it has no such
feature or its behaviour is fixed: any other value fails with the key and the reason, never
silently ignored.
*/}}
{{- define "karpenter.unsupported" -}}
{{- $v := .Values }}
{{- $s := $v.settings }}
{{- if $s.eksControlPlane }}
{{- fail "settings.eksControlPlane=true is not supported: karpenter-rs does not call EKS DescribeCluster; set settings.clusterEndpoint (and settings.clusterCABundle) instead" }}
{{- end }}
{{- if $s.enableZonalShift }}
{{- fail "settings.enableZonalShift=true is not supported: karpenter-rs does not read ARC zonal shifts" }}
{{- end }}
{{- if not $s.ignoreDRARequests }}
{{- fail "settings.ignoreDRARequests=false is not supported: karpenter-rs schedules without DRA resource claims (as upstream's default, true)" }}
{{- end }}
{{- if ne (toString $s.amiRefreshInterval) "1m" }}
{{- fail (printf "settings.amiRefreshInterval=%v is not supported: karpenter-rs resolves node classes' AMIs every minute, fixed (only 1m is accepted)" $s.amiRefreshInterval) }}
{{- end }}
{{- if ne (toString $s.subnetRefreshInterval) "1m" }}
{{- fail (printf "settings.subnetRefreshInterval=%v is not supported: karpenter-rs resolves node classes' subnets every minute, fixed (only 1m is accepted)" $s.subnetRefreshInterval) }}
{{- end }}
{{- if $s.featureGates.capacityBuffer }}
{{- fail "settings.featureGates.capacityBuffer=true is not supported: karpenter-rs has no capacity buffers" }}
{{- end }}
{{- if ne (toJson $v.logOutputPaths) (toJson (list "stdout")) }}
{{- fail (printf "logOutputPaths=%v is not supported: karpenter-rs writes its log lines to stdout only (only [stdout] is accepted)" (toJson $v.logOutputPaths)) }}
{{- end }}
{{- if ne (toJson $v.logErrorOutputPaths) (toJson (list "stderr")) }}
{{- fail (printf "logErrorOutputPaths=%v is not supported: it is zap's destination of the logger's own failures, which karpenter-rs's logger does not have; ERROR lines go to stdout with the others, as upstream's do (only upstream's default, [stderr], is accepted)" (toJson $v.logErrorOutputPaths)) }}
{{- end }}
{{- if and $v.webhook $v.webhook.enabled }}
{{- fail "webhook.enabled=true is not supported: karpenter-rs has no webhooks (upstream v1.0's conversion webhooks; v1 validation is in the CRDs, and `karpenter migrate` rewrites v1beta1 manifests)" }}
{{- end }}
{{- end }}
