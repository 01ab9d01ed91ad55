{{/*
sharestate-operator.sidecarContainer renders the persister sidecar as one entry of a broker pod's
initContainers: a native sidecar (restartPolicy: Always) that starts, and passes its startup probe,
before the broker's containers start, and stops after they have stopped.

It takes a dict:
  context            required: this chart's top-level context. Inside this chart that is `.`; in a
                     chart that depends on this one, `(index .Subcharts "sharestate-operator")` (or the
                     dependency's alias), whose .Values are the values given to this chart.
  brokerId           the broker id (node.id) the sidecar serves, a number. When unset or empty it is
                     read from the pod by brokerIdFieldPath.
  brokerIdFieldPath  a downward-API field path holding the broker id; default
                     metadata.labels['apps.kubernetes.io/pod-index'], the ordinal of a StatefulSet's pod.

The pod must run under sidecar.serviceAccountName, in a namespace listed in sidecar.rbac.namespaces.
In direct mode its broker must use 127.0.0.1:<sidecar.listenPort> as its share-state persister; with
sidecar.proxy.enabled the broker binds its inter-broker listener on sidecar.proxy.upstreamAddress and
advertises the pod's sidecar.proxy.port for it (docs/kafka-integration.md). With
sidecar.proxy.tls.volumeName the pod must have that volume. README.md shows how to include this
template.
*/}}
{{- define "sharestate-operator.sidecarContainer" -}}
{{- $ctx := required "sharestate-operator.sidecarContainer: pass this chart's context as \"context\"" (get . "context") }}
{{- $v := $ctx.Values.sidecar }}
{{- $brokerId := "" }}
{{- $given := get . "brokerId" }}
{{- if not (kindIs "invalid" $given) }}
{{- $brokerId = toString $given }}
{{- end }}
{{- if and $brokerId (not (regexMatch "^[0-9]+$" $brokerId)) }}
{{- fail (printf "sharestate-operator.sidecarContainer: brokerId must be a non-negative integer, not %q" $brokerId) }}
{{- end }}
{{- $proxy := $v.proxy }}
{{- $ports := list (int $v.listenPort) (int $v.healthPort) (int $v.metricsPort) }}
{{- if $proxy.enabled }}
{{- $ports = append $ports (int $proxy.port) }}
{{- end }}
{{- if ne (len $ports) (len (uniq $ports)) }}
{{- fail "sidecar.listenPort, sidecar.healthPort and sidecar.metricsPort must differ, and from sidecar.proxy.port when proxy mode is on: they share the broker pod's network" }}
{{- end }}
{{- if and $proxy.tls.verifyClients (not $proxy.tls.volumeName) }}
{{- fail "sidecar.proxy.tls.verifyClients needs sidecar.proxy.tls.volumeName: the clients' CA is its ca.crt" }}
{{- end }}
{{- $tlsDir := "/etc/sharestate/proxy-tls" }}
{{- $fieldPath := get . "brokerIdFieldPath" | default "metadata.labels['apps.kubernetes.io/pod-index']" -}}
- name: sharestate-sidecar
  image: {{ include "sharestate-operator.image" (dict "image" $v.image "context" $ctx) }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  restartPolicy: Always
  args:
    - --broker-id={{ $brokerId | default "$(BROKER_ID)" }}
    - --listen-address=127.0.0.1:{{ $v.listenPort }}
    - --health-probe-bind-address=:{{ $v.healthPort }}
    {{- if $v.metricsSecure }}
    - --metrics-bind-address=:{{ $v.metricsPort }}
    {{- else }}
    - --metrics-secure=false
    - --metrics-bind-address=127.0.0.1:{{ $v.metricsPort }}
    {{- end }}
    {{- if $proxy.enabled }}
    # Proxy mode: the port the broker advertises for its inter-broker listener, in front of that
    # listener's real address on loopback.
    - --proxy-listen-address=:{{ $proxy.port }}
    - --proxy-upstream-address={{ $proxy.upstreamAddress }}
    {{- if $proxy.requireAuthentication }}
    - --proxy-require-authentication
    {{- end }}
    {{- if $proxy.tls.volumeName }}
    - --proxy-tls-cert-file={{ $tlsDir }}/tls.crt
    - --proxy-tls-key-file={{ $tlsDir }}/tls.key
    {{- if $proxy.tls.verifyClients }}
    - --proxy-tls-client-ca-file={{ $tlsDir }}/ca.crt
    {{- end }}
    {{- end }}
    {{- if $proxy.tls.upstream }}
    - --proxy-upstream-tls
    {{- if $proxy.tls.volumeName }}
    - --proxy-upstream-tls-ca-file={{ $tlsDir }}/ca.crt
    {{- end }}
    {{- with $proxy.tls.upstreamServerName }}
    - --proxy-upstream-tls-server-name={{ . }}
    {{- end }}
    {{- end }}
    {{- end }}
    - --zap-log-level={{ $v.logging.level }}
    - --zap-encoder={{ $v.logging.format }}
    {{- with $v.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  env:
    # The broker pod's identity, recorded as the leader of the partitions it writes: the operator
    # fences them when this pod is gone. The sidecar's defaults for --pod-name, --pod-uid, --namespace.
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: POD_UID
      valueFrom:
        fieldRef:
          fieldPath: metadata.uid
    # The Go runtime collects harder as the heap nears the container's memory limit, instead of
    # letting it reach twice what is live (--max-cache-bytes is sized for that).
    - name: GOMEMLIMIT
      valueFrom:
        resourceFieldRef:
          resource: limits.memory
    {{- if not $brokerId }}
    - name: BROKER_ID
      valueFrom:
        fieldRef:
          fieldPath: {{ $fieldPath | quote }}
    {{- end }}
  ports:
    {{- if $proxy.enabled }}
    # The other brokers connect here: the broker's advertised inter-broker listener.
    - name: sstate-proxy
      containerPort: {{ $proxy.port }}
      protocol: TCP
    {{- end }}
    - name: sstate-health
      containerPort: {{ $v.healthPort }}
      protocol: TCP
    {{- if $v.metricsSecure }}
    # HTTPS; the API server authenticates and authorizes each scrape.
    - name: sstate-metrics
      containerPort: {{ $v.metricsPort }}
      protocol: TCP
    {{- end }}
  # /readyz is the sidecar's Kafka listeners serving (in proxy mode, the address the broker's peers
  # reach it at), never the Kubernetes API server: the broker starts once they serve, whatever the API
  # server does (docs/kafka-integration.md §4). Checked every second, for up to 2 minutes.
  startupProbe:
    httpGet:
      path: /readyz
      port: sstate-health
    periodSeconds: 1
    failureThreshold: 120
  livenessProbe:
    httpGet:
      path: /healthz
      port: sstate-health
    periodSeconds: 10
  # A native sidecar's readiness counts toward the pod's Ready: the broker pod is Ready only while
  # the sidecar's listeners serve, and an unreachable API server does not take it out of service.
  readinessProbe:
    httpGet:
      path: /readyz
      port: sstate-health
    periodSeconds: 10
    # /readyz answers from memory; the margin is for a pod starved of CPU.
    timeoutSeconds: 3
  {{- if and $proxy.enabled $proxy.tls.volumeName }}
  volumeMounts:
    - name: {{ $proxy.tls.volumeName }}
      mountPath: {{ $tlsDir }}
      readOnly: true
  {{- end }}
  {{- with $v.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
