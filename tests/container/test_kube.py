"""deploy/kubernetes/pod.yaml played by `podman kube play` (issue 24, item
3; no cluster is reachable here). Podman 4.3 ignores the spec's procMount:
Unmasked, so the worker's world cannot be built in a played pod: the
shipped spec, with the key from a Secret mounted as a file, refuses to
run (--isolation required: exit 3, said). Played degraded (best-effort:
no view, but Landlock keeps the cells from the key file), the run starts with the state on a claimed volume and the
endpoint from a ConfigMap, its pod is killed mid-cell (`podman pod
kill`), played again, and the run resumes from the journal on the volume
to quit() with the killed cell recorded once. The Job and the Sandbox
carry the same Pod spec (checked here).

What the test changes in the played spec, and why: the image (the one
loaded), the task, hostNetwork (its model server listens on the host's
127.0.0.1), hostUsers (Podman plays `false` as --userns=auto, which needs
/etc/subuid ranges for a user `containers` this machine has none of), and
for the resume the isolation (above). Podman
4.3 writes a kube Secret's `data` into the mounted
file still base64-encoded (and ignores `stringData`): the played key
file holds the encoded text (the local model server needs none).
"""
import base64
import json
import os
import subprocess
import sys
import uuid

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integ"))
sys.path.insert(0, HERE)

from agentz_util import ROOT  # noqa: E402
from test_container import PODMAN, TIMEOUT, image  # noqa: E402,F401

KUBE = os.path.join(ROOT, "deploy", "kubernetes")
CONF = """[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
"""


def load(name):
    with open(os.path.join(KUBE, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def pod_spec():
    return load("pod.yaml")[0]["spec"]


@pytest.fixture
def kube(tmp_path):
    """podman as kube play needs it here: the limits in a containers.conf
    of the test's own (kube play takes no --ulimit), and everything the
    test makes removed after."""
    conf = tmp_path / "containers.conf"
    conf.write_text(CONF)
    env = dict(os.environ, CONTAINERS_CONF=str(conf))
    tag = uuid.uuid4().hex[:10]
    names = {"pod": "agentz-run-" + tag, "claim": "agentz-state-" + tag,
             "key": "agentz-key-" + tag, "endpoint": "agentz-endpoint-" + tag}

    def podman(*args, check=True, **kw):
        p = subprocess.run(PODMAN + list(args), capture_output=True,
                           text=True, timeout=TIMEOUT, env=env, **kw)
        if check:
            assert p.returncode == 0, (args, p.stderr)
        return p
    podman.env = env
    yield podman, names, tmp_path
    podman("pod", "rm", "-f", names["pod"], check=False)
    podman("secret", "rm", names["key"], check=False)
    # a played Secret is kept as a volume of its name too
    podman("volume", "rm", "-f", names["key"], check=False)
    podman("volume", "rm", "-f", names["claim"], check=False)


def played(names, image_ref, task, base_url, tmp_path, degraded=False):
    """The shipped pod.yaml with the test's changes, and its ConfigMap.
    degraded: --isolation best-effort (Podman 4.3 cannot unmask /proc for
    a played pod, so the shipped spec refuses to run)."""
    doc = load("pod.yaml")[0]
    doc["metadata"]["name"] = names["pod"]
    spec = doc["spec"]
    spec["hostNetwork"] = True
    del spec["hostUsers"]
    c = spec["containers"][0]
    c["image"] = image_ref
    c["args"][-1] = task
    c["env"][0]["valueFrom"]["configMapKeyRef"]["name"] = names["endpoint"]
    for v in spec["volumes"]:
        if "persistentVolumeClaim" in v:
            v["persistentVolumeClaim"]["claimName"] = names["claim"]
        if "secret" in v:
            v["secret"]["secretName"] = names["key"]
    if degraded:
        i = c["args"].index("--isolation")
        c["args"][i + 1] = "best-effort"
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(doc))
    cm = tmp_path / "cm.yaml"
    cm.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": names["endpoint"]},
        "data": {"base_url": base_url}}))
    return str(pod), str(cm)


def play_secret(podman, names, tmp):
    secret = tmp / "secret.yaml"
    secret.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": names["key"]},
        "data": {"openai_api_key": base64.b64encode(
            b"sk-kube-test-not-real").decode()}}))
    podman("kube", "play", str(secret))


def _turn(match, code):
    return [{"match": match, "next_cell": {"code": code, "summary": "s"}},
            {"text": "ok"}]


def test_the_shipped_pod_refuses_to_run_without_its_world(kube, image):
    """Podman 4.3 ignores procMount: Unmasked (4.7 reads it), so a played
    pod keeps /proc masked and the worker's world cannot be built: the
    key file mounted in the pod would be in reach of cells, and the
    shipped spec (--isolation required) exits 3 saying why instead."""
    from model_server import ModelServer

    podman, names, tmp = kube
    play_secret(podman, names, tmp)
    ctr = names["pod"] + "-agentz"
    with ModelServer([]) as srv:
        pod, cm = played(names, image, "the kube task", srv.base_url, tmp)
        podman("kube", "play", "--configmap", cm, pod)
        w = podman("wait", ctr)
        logs = podman("logs", ctr)
        assert srv.bodies == []         # no model call was made
    assert w.stdout.strip() == "3", (w.stdout, logs.stderr)
    assert "isolation required but unavailable: cannot build the " \
        "worker's view: mount /proc /proc: Operation not permitted" in \
        logs.stderr, logs.stderr


def test_a_killed_pod_is_played_again_and_resumes_from_its_volume(kube,
                                                                  image):
    from model_server import ModelServer

    podman, names, tmp = kube
    play_secret(podman, names, tmp)
    first = ("try:\n"
             "    open('/run/secrets/agentz/openai_api_key').read()\n"
             "    print('KEY-READ')\n"
             "except OSError as e:\n"
             "    print('key', type(e).__name__)\n"
             "open('done-once', 'a').write('x')\n"
             "print('MID-CELL', flush=True)\n"
             "import time\n"
             "time.sleep(3600)\n")
    ctr = names["pod"] + "-agentz"
    with ModelServer(_turn("Submit the first Python cell", first)) as srv:
        pod, cm = played(names, image, "the kube task", srv.base_url, tmp,
                         degraded=True)
        podman("kube", "play", "--configmap", cm, pod)
        logs = subprocess.Popen(PODMAN + ["logs", "-f", ctr],
                                stdout=subprocess.PIPE, text=True,
                                env=podman.env)
        try:
            seen = ""
            for line in logs.stdout:        # ends at the marker or EOF
                seen += line
                if "MID-CELL" in line:
                    break
            assert "MID-CELL" in seen, seen
            # no view, but Landlock keeps the key file out of reach
            assert "key PermissionError" in seen, seen
        finally:
            logs.kill()
            logs.wait()
        podman("pod", "kill", names["pod"])
    repair = "print('went on')\nquit()\n"
    with ModelServer(_turn("Repair the failed cell", repair)) as srv:
        pod, cm = played(names, image, "the kube task", srv.base_url, tmp,
                         degraded=True)
        podman("kube", "play", "--replace", "--configmap", cm, pod)
        w = podman("wait", ctr)
        out = podman("logs", ctr)
    assert w.stdout.strip() == "0", (w.stdout, out.stderr)
    assert "went on" in out.stdout, out.stdout
    assert "isolation incomplete: landlock=7 (no view" in out.stderr, \
        out.stderr   # and said
    vol = podman("volume", "inspect", names["claim"])
    state = json.loads(vol.stdout)[0]["Mountpoint"]
    assert open(os.path.join(state, "workspace", "done-once")).read() == "x"
    recs = [json.loads(line) for line in
            open(os.path.join(state, "journal.jsonl"))]
    outs = {r["cell"]: r for r in recs if r["type"] == "output"}
    assert sorted(outs) == [0, 1, 2], [(r["type"], r.get("cell"))
                                       for r in recs]
    assert outs[1]["kind"] == "restart", outs[1]
    assert recs[-1]["type"] == "stop" and recs[-1]["exit"] == 0, recs[-1]


def test_the_job_and_the_sandbox_carry_the_played_pod_spec():
    spec = pod_spec()
    job = load("job.yaml")[0]
    assert job["kind"] == "Job"
    assert job["spec"]["template"]["spec"] == spec
    # the run's own final exits fail the Job; anything else is retried
    rule = job["spec"]["podFailurePolicy"]["rules"][0]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"]["values"] == [1, 2, 3, 4, 6]
    box = load("sandbox.yaml")[0]
    assert box["kind"] == "Sandbox"
    bspec = dict(box["spec"]["podTemplate"]["spec"])
    assert bspec.pop("restartPolicy") == "OnFailure"
    # the state volume comes from the claim template of its name
    claims = [t["metadata"]["name"] for t in
              box["spec"]["volumeClaimTemplates"]]
    state = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [v["name"] for v in state] == ["state"]
    want = dict(spec)
    want.pop("restartPolicy")
    want["volumes"] = [v for v in spec["volumes"] if v not in state]
    assert bspec == want
