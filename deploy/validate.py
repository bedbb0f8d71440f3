"""Validates minfer's deployment files offline.

    python deploy/validate.py [K8S_DIR] [--dockerfile FILE]

- Core Kubernetes objects (Deployment, Service, ...) go through
  `kubernetes-validate --strict` (PyPI; the Kubernetes OpenAPI schemas ship
  inside the package), against KUBERNETES_VERSION below.
- InferencePool and HTTPRoute go through `check-jsonschema` (PyPI) with the
  schemas in deploy/schemas, written from the documented fields of those
  APIs (see docs/DEPLOY.md).
- Then minfer's own rules: the readiness probe reads /health, the liveness
  probe does not (it is 503 while draining), and the grace period covers
  the preStop pause plus --drain-timeout.
- The Dockerfile: several stages, a final one that runs as a non-root
  user, the MODEL build argument, an entry point.

Exits 1 naming every file that fails, 0 when all pass. Needs the Python
that has both packages (scripts/test.sh installs them in target/pyenv).
"""

import os
import re
import subprocess
import sys
import tempfile

import yaml

KUBERNETES_VERSION = "1.31.0"
HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMAS = {
    ("inference.networking.k8s.io/v1", "InferencePool"): "inferencepool-v1.json",
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): "httproute-v1.json",
}
CORE_GROUPS = {"v1", "apps/v1", "policy/v1", "autoscaling/v2", "networking.k8s.io/v1"}


def tool(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def seconds(value):
    return float(str(value).rstrip("s"))


def check_deployment(doc):
    """minfer's rules for its Deployment; returns the problems."""
    problems = []
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    grace = spec.get("terminationGracePeriodSeconds", 30)
    for c in spec.get("containers", []):
        args = [str(a) for a in c.get("args", [])]
        drain = 10.0
        if "--drain-timeout" in args:
            drain = seconds(args[args.index("--drain-timeout") + 1])
        pre = c.get("lifecycle", {}).get("preStop", {})
        pause = 0.0
        cmd = pre.get("exec", {}).get("command", [])
        if len(cmd) == 2 and cmd[0] == "sleep":
            pause = seconds(cmd[1])
        elif "sleep" in pre:
            pause = seconds(pre["sleep"].get("seconds", 0))
        if grace < pause + drain + 1:
            problems.append(
                f"container {c.get('name')}: terminationGracePeriodSeconds {grace} "
                f"< preStop {pause:g} s + --drain-timeout {drain:g} s + margin"
            )
        ready = c.get("readinessProbe", {}).get("httpGet", {}).get("path")
        if ready != "/health":
            problems.append(f"container {c.get('name')}: readinessProbe must GET /health (is {ready})")
        live = c.get("livenessProbe", {}).get("httpGet", {}).get("path")
        if live == "/health":
            problems.append(
                f"container {c.get('name')}: livenessProbe on /health restarts a draining pod"
            )
        if c.get("livenessProbe") is None:
            problems.append(f"container {c.get('name')}: no livenessProbe")
        res = c.get("resources", {}).get("requests", {})
        if "memory" not in res or "cpu" not in res:
            problems.append(f"container {c.get('name')}: resources.requests needs cpu and memory")
    return problems


def check_dockerfile(path):
    problems = []
    with open(path) as f:
        lines = [l.strip() for l in f if l.strip() and not l.lstrip().startswith("#")]
    stages = [i for i, l in enumerate(lines) if re.match(r"(?i)^FROM\s", l)]
    if len(stages) < 2:
        problems.append("not a multi-stage build")
        return problems
    final = lines[stages[-1] :]
    users = [l.split(None, 1)[1] for l in final if re.match(r"(?i)^USER\s", l)]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append("the runtime stage does not switch to a non-root USER")
    if not any(re.match(r"(?i)^ARG\s+MODEL\b", l) for l in final):
        problems.append("the runtime stage has no ARG MODEL")
    if not any(re.match(r"(?i)^ENTRYPOINT\s", l) for l in final):
        problems.append("no ENTRYPOINT")
    return problems


def main(argv):
    k8s_dir = os.path.join(HERE, "k8s")
    dockerfile = os.path.join(HERE, "Dockerfile")
    args = list(argv)
    if "--dockerfile" in args:
        i = args.index("--dockerfile")
        dockerfile = args[i + 1]
        del args[i : i + 2]
    if args:
        k8s_dir = args[0]
    failed = []
    files = sorted(f for f in os.listdir(k8s_dir) if f.endswith((".yaml", ".yml")))
    if not files:
        failed.append(f"{k8s_dir}: no manifests")
    for name in files:
        path = os.path.join(k8s_dir, name)
        try:
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            failed.append(f"{name}: not YAML: {e}")
            continue
        for n, doc in enumerate(docs):
            where = f"{name}#{n}" if len(docs) > 1 else name
            if not isinstance(doc, dict):
                failed.append(f"{where}: not an object")
                continue
            key = (doc.get("apiVersion"), doc.get("kind"))
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as one:
                yaml.safe_dump(doc, one)
            try:
                if key in SCHEMAS:
                    schema = os.path.join(HERE, "schemas", SCHEMAS[key])
                    rc, out = run([tool("check-jsonschema"), "--schemafile", schema, one.name])
                    validator = f"check-jsonschema ({SCHEMAS[key]})"
                elif key[0] in CORE_GROUPS:
                    rc, out = run(
                        [tool("kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, one.name]
                    )
                    validator = f"kubernetes-validate {KUBERNETES_VERSION} --strict"
                else:
                    rc, out, validator = 1, f"no schema for {key}", "none"
            finally:
                os.unlink(one.name)
            if rc != 0:
                failed.append(f"{where} ({key[1]}), {validator}: {out.replace(one.name, where)}")
                continue
            if key == ("apps/v1", "Deployment"):
                failed += [f"{where}: {p}" for p in check_deployment(doc)]
            print(f"ok  {where} ({key[1]}): {validator}")
    if dockerfile:
        problems = check_dockerfile(dockerfile)
        failed += [f"{os.path.basename(dockerfile)}: {p}" for p in problems]
        if not problems:
            print(f"ok  {os.path.basename(dockerfile)}: multi-stage, non-root, ARG MODEL")
    if failed:
        print("FAILED:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
