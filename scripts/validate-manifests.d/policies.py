"""deploy/fleet-job.yaml's admission policies, evaluated offline on the requests they exist for.

Each ValidatingAdmissionPolicy's matchConstraints (operations, resources, the namespace), its
matchConditions, variables and validations are evaluated as the API server does (CEL, with
PyPI's cel-python; variables in order, an error a value that && and || absorb; an error in a
validation denies, failurePolicy Fail), on node updates and pod requests built from the shipped
files (the CronJob's pod template, railsweep's pods of every mode from the snapshots). One line
per case, `pass`/`FAIL`; the checks the cluster tests make against a real API server
(orchestrator/tests/cluster/deploy_cluster.rs), and the ones they cannot: who may create a pod
that runs as the fleet's account, and exec into its pod.

Usage: python3 policies.py REPO  (prints one line per case; exit 1 when any failed)
"""
import copy
import glob
import sys

import celpy
import yaml
from celpy.evaluation import CELEvalError

REPO = sys.argv[1] if len(sys.argv) > 1 else "."
ENV = celpy.Environment()
COMPILED = {}


def ev(expr, act):
    prg = COMPILED.get(expr)
    if prg is None:
        prg = COMPILED[expr] = ENV.program(ENV.compile(expr))
    try:
        return prg.evaluate(act)
    except CELEvalError as e:
        return e
    except Exception as e:  # noqa: BLE001 - any failure of the evaluator counts as an error
        return CELEvalError(str(e))


def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


FLEET = docs(f"{REPO}/deploy/fleet-job.yaml")
POLICIES = {d["metadata"]["name"]: d for d in FLEET if d["kind"] == "ValidatingAdmissionPolicy"}
BINDINGS = {d["spec"]["policyName"]: d for d in FLEET if d["kind"] == "ValidatingAdmissionPolicyBinding"}
CRONJOB = next(d for d in FLEET if d["kind"] == "CronJob")
NS = next(d for d in docs(f"{REPO}/deploy/namespace.yaml") if d["kind"] == "Namespace")["metadata"]["name"]


def matched(policy, req):
    mc = policy["spec"]["matchConstraints"]
    ok = any(
        req["operation"] in r["operations"]
        and (req["resource"] + ("/" + req["subResource"] if req.get("subResource") else "")) in r["resources"]
        for r in mc["resourceRules"]
    )
    sel = mc.get("namespaceSelector")
    if ok and sel:
        for e in sel.get("matchExpressions", []):
            assert e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "In", e
            ok = ok and req.get("namespace") in e["values"]
        for k, v in sel.get("matchLabels", {}).items():
            assert k == "kubernetes.io/metadata.name", k
            ok = ok and req.get("namespace") == v
    return ok


def admit(name, req, obj, old=None):
    """None when admitted, else the message (or the error) of the first validation that denies."""
    policy = POLICIES[name]
    assert BINDINGS[name]["spec"]["validationActions"] == ["Deny"], name
    assert policy["spec"]["failurePolicy"] == "Fail", name
    if not matched(policy, req):
        return None
    act = celpy.json_to_cel({"request": req, "object": obj, "oldObject": old})
    act = dict(act)
    for mc in policy["spec"].get("matchConditions", []):
        r = ev(mc["expression"], act)
        if isinstance(r, CELEvalError):
            return f"matchCondition {mc['name']}: error {r}"
        if not bool(r):
            return None
    variables = {}
    for v in policy["spec"].get("variables", []):
        act["variables"] = celpy.celtypes.MapType(variables)
        variables[celpy.celtypes.StringType(v["name"])] = ev(v["expression"], act)
    act["variables"] = celpy.celtypes.MapType(variables)
    for val in policy["spec"]["validations"]:
        r = ev(val["expression"], act)
        if isinstance(r, CELEvalError):
            return f"error: {r} ({val['message']})"
        if not bool(r):
            return val["message"]
    return None


passed = failed = 0


def case(what, got, want):
    """`want`: None for admitted, else a fragment of the refusal's message."""
    global passed, failed
    ok = got is None if want is None else (got is not None and want in got and not got.startswith("error"))
    if ok:
        passed += 1
        print(f"pass  {what}: {'admitted' if got is None else 'refused: ' + got}")
    else:
        failed += 1
        print(f"FAIL  {what}: {'admitted' if got is None else got}; want {'admitted' if want is None else 'refused: ' + want}")


def user(account):
    return {"username": f"system:serviceaccount:{NS}:{account}"}


# --- railsweep-verdicts: node updates by the fleet's account -----------------------------
OTHER = "example.com/keep"
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {OTHER: "yes"}, "annotations": {OTHER: "kept"}},
    "spec": {"taints": [{"key": OTHER, "value": "x", "effect": "NoSchedule"}]},
}


def node(edit):
    n = copy.deepcopy(NODE)
    edit(n)
    return n


def node_update(what, old, new, want, who=None):
    req = {"operation": "UPDATE", "resource": "nodes", "name": "n1", "userInfo": who or user("railsweep-fleet")}
    case(f"verdicts: {what}", admit("railsweep-verdicts", req, new, old), want)


def set_labels(**kv):
    return lambda n: n["metadata"]["labels"].update(kv)


def add_taint(key, effect, value=None):
    def f(n):
        t = {"key": key, "effect": effect}
        if value is not None:
            t["value"] = value
        n["spec"]["taints"].append(t)
    return f


LABELS = "may change only labels under railbench.io/"
ANNOTATIONS = "may change only annotations under railbench.io/"
TAINTS = "may change only taints under railbench.io/"
ours = node(lambda n: (n["metadata"]["labels"].update({"railbench.io/rails": "failed", "railbench.io/rails-checked": "2026-12-04"}),
                       n["metadata"]["annotations"].update({"railbench.io/rails-evidence": "rail 1: 12 % of the fleet median"})))
node_update("railsweep's labels and annotation set", NODE, ours, None)
node_update("railsweep's label removed", ours, node(lambda n: (n["metadata"]["labels"].update({"railbench.io/rails": "failed"}),
            n["metadata"]["annotations"].update({"railbench.io/rails-evidence": "x"}))), None)
tainted = node(add_taint("railbench.io/bad-rails", "NoSchedule", "1.3"))
node_update("railsweep's taint (NoSchedule) added", NODE, tainted, None)
node_update("railsweep's taint with the value the cluster test uses", NODE, node(add_taint("railbench.io/bad-rails", "NoSchedule", "failed")), None)
node_update("railsweep's taint's rails changed", tainted, node(add_taint("railbench.io/bad-rails", "NoSchedule", "1")), None)
node_update("railsweep's taint removed", tainted, NODE, None)
node_update("railsweep's key with effect NoExecute (evicts workloads)", NODE, node(add_taint("railbench.io/bad-rails", "NoExecute", "1")), TAINTS)
node_update("railsweep's key with effect PreferNoSchedule", NODE, node(add_taint("railbench.io/bad-rails", "PreferNoSchedule")), TAINTS)
node_update("another railbench.io/ taint key", NODE, node(add_taint("railbench.io/drain", "NoSchedule")), TAINTS)
node_update("another railbench.io/ taint key, NoExecute", NODE, node(add_taint("railbench.io/x", "NoExecute")), TAINTS)
node_update("a taint of another owner", NODE, node(add_taint("example.com/other", "NoExecute")), TAINTS)
node_update("another owner's taint removed", NODE, node(lambda n: n["spec"].update({"taints": []})), TAINTS)
node_update("another railbench.io/ label", NODE, node(set_labels(**{"railbench.io/other": "x"})), LABELS)
node_update("a label of another owner", NODE, node(set_labels(**{"example.com/other": "x"})), LABELS)
node_update("another owner's label changed", NODE, node(set_labels(**{OTHER: "no"})), LABELS)
node_update("another owner's label removed", NODE, node(lambda n: n["metadata"]["labels"].pop(OTHER)), LABELS)
node_update("another railbench.io/ annotation", NODE, node(lambda n: n["metadata"]["annotations"].update({"railbench.io/x": "1"})), ANNOTATIONS)
node_update("another owner's annotation removed", NODE, node(lambda n: n["metadata"]["annotations"].pop(OTHER)), ANNOTATIONS)
node_update("cordon", NODE, node(lambda n: n["spec"].update({"unschedulable": True})), "may not cordon")
node_update("NoExecute by an administrator (not this policy's)", NODE, node(add_taint("railbench.io/bad-rails", "NoExecute")), None,
            who={"username": "kubernetes-admin"})

# --- railsweep-device-taints: the fleet's account and DeviceTaintRules ----------------------
RULE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "railbench-fleet-6-rail1",
                 "labels": {"app.kubernetes.io/managed-by": "railsweep", "railbench.io/rail": "1"}},
    "spec": {"deviceSelector": {"driver": "dra.net", "pool": "fleet-6", "device": "net2"},
             "taint": {"key": "railbench.io/bad-rail", "value": "degraded", "effect": "NoSchedule"}},
}
OTHERS_RULE = {**copy.deepcopy(RULE), "metadata": {"name": "drain-gpu-3", "labels": {"team": "ops"}}}
OTHERS_RULE["spec"]["taint"] = {"key": "example.com/maintenance", "effect": "NoExecute"}


def rule(edit):
    r = copy.deepcopy(RULE)
    edit(r)
    return r


def rule_request(what, op, new, old, want, who=None):
    req = {"operation": op, "resource": "devicetaintrules", "name": (new or old)["metadata"]["name"],
           "userInfo": who or user("railsweep-fleet")}
    case(f"device taints: {what}", admit("railsweep-device-taints", req, new, old), want)


OWN = "may change or delete only its own DeviceTaintRules"
WRITE = "may write only DeviceTaintRules labelled app.kubernetes.io/managed-by=railsweep"
rule_request("railsweep's rule created", "CREATE", RULE, None, None)
rule_request("railsweep's rule updated", "UPDATE", rule(lambda r: r["spec"]["taint"].update({"value": "failed"})), RULE, None)
rule_request("railsweep's rule deleted", "DELETE", None, RULE, None)
rule_request("a rule with effect NoExecute (evicts the device's pods)", "CREATE",
             rule(lambda r: r["spec"]["taint"].update({"effect": "NoExecute"})), None, WRITE)
rule_request("railsweep's rule turned NoExecute", "UPDATE",
             rule(lambda r: r["spec"]["taint"].update({"effect": "NoExecute"})), RULE, WRITE)
rule_request("a rule with another taint key", "CREATE",
             rule(lambda r: r["spec"]["taint"].update({"key": "railbench.io/drain"})), None, WRITE)
rule_request("a rule without railsweep's label", "CREATE", rule(lambda r: r["metadata"].pop("labels")), None, WRITE)
rule_request("another owner's rule deleted", "DELETE", None, OTHERS_RULE, OWN)
rule_request("another owner's rule taken over (railsweep's label put on it)", "UPDATE",
             {**OTHERS_RULE, "metadata": RULE["metadata"], "spec": RULE["spec"]}, OTHERS_RULE, OWN)
rule_request("another owner's rule deleted by an administrator (not this policy's)", "DELETE", None, OTHERS_RULE, None,
             who={"username": "kubernetes-admin"})

# --- railsweep-fleet-pods: who may run as the fleet, and exec into it --------------------
TEMPLATE = CRONJOB["spec"]["jobTemplate"]["spec"]["template"]


def fleet_pod(edit=None, generate="railsweep-fleet-29412345-"):
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(TEMPLATE["metadata"]),
         "spec": copy.deepcopy(TEMPLATE["spec"])}
    p["metadata"]["generateName"] = generate
    p["metadata"]["name"] = generate + "x7k2q"
    p["metadata"]["namespace"] = NS
    if edit:
        edit(p)
    return p


def create(what, pod, who, want, namespace=None):
    req = {"operation": "CREATE", "resource": "pods", "namespace": namespace or NS, "name": pod["metadata"].get("name", ""),
           "userInfo": who}
    case(f"pods: {what}", admit("railsweep-fleet-pods", req, pod), want)


JOBS = {"username": "system:serviceaccount:kube-system:job-controller"}
KCM = {"username": "system:kube-controller-manager"}
ADMIN = {"username": "kubernetes-admin"}
RUNS_AS = "runs as railsweep-fleet only as the fleet CronJob's"
IS_CRONJOBS = "is the CronJob's: one container of its image"
HOSTPATH = "mount no hostPath"
SECRETS = "read no Secret"
EXEC = "may not exec into, attach to or port-forward to the fleet's pods"

create("the CronJob's pod, made by the Job controller", fleet_pod(), JOBS, None)
create("the CronJob's pod, made by the controller manager's own identity", fleet_pod(), KCM, None)
create("the CronJob's pod of a manual Job railsweep-fleet-now", fleet_pod(generate="railsweep-fleet-now-"), JOBS, None)
create("a pod as railsweep-fleet made by the railsweep account", fleet_pod(), user("railsweep"), RUNS_AS)
create("a pod as railsweep-fleet made by the railsweep account, no generateName",
       fleet_pod(lambda p: p["metadata"].pop("generateName")), user("railsweep"), RUNS_AS)
create("a pod as railsweep-fleet made by an administrator", fleet_pod(), ADMIN, RUNS_AS)
create("a Job's pod as railsweep-fleet of a Job not named railsweep-fleet-*", fleet_pod(generate="evil-"), JOBS, RUNS_AS)
create("a pod naming railsweep-fleet in the deprecated serviceAccount field",
       fleet_pod(lambda p: (p["spec"].pop("serviceAccountName"), p["spec"].update({"serviceAccount": "railsweep-fleet"}))),
       user("railsweep"), RUNS_AS)
create("the fleet's pod with another image", fleet_pod(lambda p: p["spec"]["containers"][0].update({"image": "evil/shell:1"})), JOBS, IS_CRONJOBS)
create("the fleet's pod with another command", fleet_pod(lambda p: p["spec"]["containers"][0].update({"command": ["sh", "-c", "cat /var/run/secrets/*"]})), JOBS, IS_CRONJOBS)
create("the fleet's pod with a second container",
       fleet_pod(lambda p: p["spec"]["containers"].append({"name": "x", "image": "evil/shell:1"})), JOBS, IS_CRONJOBS)
create("the fleet's pod with an init container",
       fleet_pod(lambda p: p["spec"].update({"initContainers": [{"name": "x", "image": "evil/shell:1"}]})), JOBS, IS_CRONJOBS)
create("the fleet's pod with a hostPath volume",
       fleet_pod(lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/var/lib/kubelet"}})), JOBS, HOSTPATH)

snapshots = sorted(glob.glob(f"{REPO}/orchestrator/tests/snapshots/manifests/*.yaml"))
assert snapshots, "no snapshots"
for path in snapshots:
    for d in docs(path):
        if d["kind"] != "Pod":
            continue
        d = copy.deepcopy(d)
        d["metadata"]["namespace"] = NS
        name = path.rsplit("/", 1)[1] + " " + d["metadata"]["name"]
        create(f"railsweep's pod {name}, made by the railsweep account", d, user("railsweep"), None)
        create(f"railsweep's pod {name}, made by the fleet's account", d, user("railsweep-fleet"), None)

POD = next(d for d in docs(f"{REPO}/orchestrator/tests/snapshots/manifests/hostnetwork.yaml") if d["kind"] == "Pod")
POD["metadata"]["namespace"] = NS


def sweep_pod(edit):
    p = copy.deepcopy(POD)
    edit(p)
    return p


with_host_path = sweep_pod(lambda p: p["spec"].setdefault("volumes", []).append({"name": "h", "hostPath": {"path": "/"}}))
create("railsweep's account: a pod with a hostPath volume", with_host_path, user("railsweep"), HOSTPATH)
create("the fleet's account: a pod with a hostPath volume", with_host_path, user("railsweep-fleet"), HOSTPATH)
create("an administrator: a pod with a hostPath volume (not this policy's)", with_host_path, ADMIN, None)
create("railsweep's account: a pod with a hostPath volume in another namespace (not this policy's)", with_host_path,
       user("railsweep"), None, namespace="default")
create("railsweep's account: a pod mounting a Secret",
       sweep_pod(lambda p: p["spec"].setdefault("volumes", []).append({"name": "s", "secret": {"secretName": "regcred"}})),
       user("railsweep"), SECRETS)
create("railsweep's account: a pod projecting a Secret",
       sweep_pod(lambda p: p["spec"].setdefault("volumes", []).append(
           {"name": "s", "projected": {"sources": [{"secret": {"name": "regcred"}}]}})),
       user("railsweep"), SECRETS)
create("railsweep's account: a Secret in the environment",
       sweep_pod(lambda p: p["spec"]["containers"][0].setdefault("env", []).append(
           {"name": "T", "valueFrom": {"secretKeyRef": {"name": "regcred", "key": "k"}}})),
       user("railsweep"), SECRETS)
create("railsweep's account: a Secret as the environment",
       sweep_pod(lambda p: p["spec"]["containers"][0].setdefault("envFrom", []).append({"secretRef": {"name": "regcred"}})),
       user("railsweep"), SECRETS)


def connect(what, sub, pod, who, want):
    req = {"operation": "CONNECT", "resource": "pods", "subResource": sub, "namespace": NS, "name": pod, "userInfo": who}
    case(f"{sub}: {what}", admit("railsweep-fleet-pods", req, {"kind": "PodExecOptions", "stdin": True, "command": ["sh"]}), want)


for sub in ["exec", "attach", "portforward"]:
    connect("the railsweep account into the CronJob's pod", sub, "railsweep-fleet-29412345-x7k2q", user("railsweep"), EXEC)
connect("the railsweep account into its own pod", "exec", "railsweep-20261129t101500z-hostnetwork-server", user("railsweep"), None)
connect("the railsweep account into a pod of the user's", "exec", "nccl-worker-0", user("railsweep"), None)
connect("the fleet's account into its pod", "exec", "railsweep-20261129t101500z-hostnetwork-node-a", user("railsweep-fleet"), None)
connect("an administrator into the CronJob's pod", "exec", "railsweep-fleet-29412345-x7k2q", ADMIN, None)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
