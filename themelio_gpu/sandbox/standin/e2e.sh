#!/usr/bin/env bash
# Apply a synthesized stack of the example fleet with the stand-in providers on a kwok control plane, then a
# second plan and destroy. Usage: e2e.sh [STACK] (default gpu-east; run from anywhere in the clone).
# Needs the sandbox tools (make sandbox-tools) in $THEMELIO_TOOLS_CACHE or ~/.cache/themelio-gpu/tools,
# terraform, kubectl on PATH, and the project's .venv. Leaves nothing behind: the cluster is deleted on exit
# (KEEP=1 keeps the Terraform folder with each command's output).
set -euo pipefail
STACK=${1:-gpu-east}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
TOOLS=${THEMELIO_TOOLS_CACHE:-$HOME/.cache/themelio-gpu/tools}
K8S=$(ls -d "$TOOLS"/kubernetes-1.36-v* "$TOOLS"/kubernetes-v1.36* 2>/dev/null | head -1 || true)
WORK=$(mktemp -d /tmp/standin-e2e.XXXXXX)
export KWOK_WORKDIR=$WORK/kwok
KWOKCTL=$TOOLS/kwok-v0.8.0/kwokctl
cleanup() { "$KWOKCTL" delete cluster --name standin-e2e >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] && echo "outputs kept in $WORK/tf" || rm -rf "$WORK"; }
trap cleanup EXIT INT TERM

echo "== build the stand-ins into a filesystem mirror"
M=$WORK/mirror/registry.terraform.io/hashicorp
(cd "$HERE" && go build -trimpath -ldflags "-X main.version=2.38.0" \
	-o "$M/kubernetes/2.38.0/linux_amd64/terraform-provider-kubernetes_v2.38.0" ./cmd/terraform-provider-kubernetes &&
	go build -trimpath -ldflags "-X main.version=3.1.1" \
		-o "$M/helm/3.1.1/linux_amd64/terraform-provider-helm_v3.1.1" ./cmd/terraform-provider-helm)
cat >"$WORK/tf.rc" <<EOF
provider_installation {
  filesystem_mirror {
    path    = "$WORK/mirror"
    include = ["registry.terraform.io/hashicorp/*"]
  }
}
EOF

echo "== kwok cluster (kube-apiserver $(basename "$K8S"))"
PORT=$((42000 + RANDOM % 2000))
"$KWOKCTL" create cluster --name standin-e2e --runtime binary \
	--kube-apiserver-binary "$K8S/kube-apiserver" --kube-controller-manager-binary "$K8S/kube-controller-manager" \
	--kube-scheduler-binary "$K8S/kube-scheduler" --etcd-binary "$TOOLS/etcd-v3.6.16/etcd" \
	--kwok-controller-binary "$TOOLS/kwok-v0.8.0/kwok" --kube-apiserver-port $PORT --etcd-port $((PORT + 1)) \
	--controller-port $((PORT + 2)) --kube-controller-manager-port $((PORT + 3)) --kube-scheduler-port $((PORT + 4)) \
	--kubeconfig "$WORK/home/.kube/kwok.yaml" --wait 120s >/dev/null 2>&1

echo "== synthesize $STACK"
(cd "$ROOT" && JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 .venv/bin/python main.py \
	--catalog tests/fixtures/fleets/example/catalog/gpu-catalog.yaml \
	--stacks-dir tests/fixtures/fleets/example/stacks --outdir "$WORK/out" >/dev/null)
W=$WORK/tf && mkdir -p "$W" && cp "$WORK/out/stacks/$STACK/cdk.tf.json" "$W/"
CTX=$(python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['provider']['kubernetes'][0]; print(p.get('config_context',''))" "$W/cdk.tf.json")
[ -n "$CTX" ] || { echo "$STACK's provider has no config_context: not supported by this script" >&2; exit 2; }
export HOME=$WORK/home KUBECONFIG=$WORK/home/.kube/config TF_CLI_CONFIG_FILE=$WORK/tf.rc TF_IN_AUTOMATION=1
cp "$HOME/.kube/kwok.yaml" "$KUBECONFIG" && kubectl config rename-context kwok-standin-e2e "$CTX" >/dev/null

echo "== nodes: the stack's static nodes as the kubelet registers them (register-with-taints), and one CPU node"
NODES=$(python3 -c "
import json,re,sys
d=json.load(open(sys.argv[1]))
print(' '.join(sorted({n for r in d['resource'].get('kubernetes_node_taint',{}).values() for n in re.findall(r'\"([^\"]+)\"', r['for_each'])})))" "$W/cdk.tf.json")
for n in $NODES cpu-01; do
	taints="[{key: nvidia.com/gpu, value: present, effect: NoSchedule}]"
	[ "$n" = cpu-01 ] && taints="[]"
	kubectl create --field-manager=kubelet -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $n
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: $n, kubernetes.io/arch: amd64, kubernetes.io/os: linux}
spec: {taints: $taints}
status: {allocatable: {cpu: "64", memory: 512Gi, pods: "110"}, capacity: {cpu: "64", memory: 512Gi, pods: "110"}}
EOF
done
FIRST=${NODES%% *}
kubectl taint node "$FIRST" --field-manager=ops-controller example.com/maintenance=planned:PreferNoSchedule >/dev/null

echo "== charts from a local folder (relative: an absolute repository path is taken for a repository URL)"
mkdir -p "$W/charts"
cp -r "$ROOT/../shared/reference/charts/gpu-operator-v26.3.3" "$W/charts/gpu-operator"
cp -r "$ROOT/../shared/reference/charts/dra-driver-nvidia-gpu-0.4.1" "$W/charts/dra-driver-nvidia-gpu"
echo '{"terraform": {"backend": {"local": {"path": "terraform.tfstate"}}}}' >"$W/backend_override.tf.json"
python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
print(json.dumps({'resource': {'helm_release': {k: {'repository': './charts'} for k in d['resource'].get('helm_release', {})}}}))" \
	"$W/cdk.tf.json" >"$W/charts_override.tf.json"

cd "$W"
terraform init -input=false -no-color >/dev/null
run() { local name=$1; shift; set +e; terraform "$@" -input=false -no-color >"$name.txt" 2>&1; echo "$name: exit $?"; set -e
	grep -E '^(Plan:|Apply complete|Destroy complete|No changes)|^  # ' "$name.txt" | sed 's/^/  /' | head -30
	grep -A9 '^Error' "$name.txt" | grep -v '^ *$' | sed 's/^/  /' | head -40 || true; }
run apply apply -auto-approve
echo "  node $FIRST: $(kubectl get node "$FIRST" -o jsonpath='taints={.spec.taints} accelerator={.metadata.labels.accelerator}')"
run plan2 plan -detailed-exitcode
run destroy destroy -auto-approve
echo "== left in the API after destroy"
kubectl get ns -o name | grep -vE 'namespace/(default|kube-.*)$' | sed 's/^/  /' || true
kubectl get crd -o name | sed 's/^/  /' || true
echo "  node $FIRST: $(kubectl get node "$FIRST" -o jsonpath='taints={.spec.taints} labels={.metadata.labels}')"
