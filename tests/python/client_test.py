"""Drives a kplane server with the official Kubernetes Python client, unchanged.

Usage: client_test.py http://127.0.0.1:PORT NODE [https://127.0.0.1:SECURE_PORT CA_FILE TOKEN]
(NODE: the name of the server's embedded node agent, where the exec checks run their pod;
the secure port's address, the certificate to verify it with, and a token of system:masters)
Exits non-zero (with a traceback) on the first thing that does not behave as with Kubernetes.
"""

import json
import sys
import threading
import time

from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from kubernetes.stream import portforward, stream
from kubernetes.utils import parse_quantity

NS = "default"


def api_client(server):
    config = client.Configuration()
    config.host = server
    return client.ApiClient(config)


def expect_status(code, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except ApiException as e:
        assert e.status == code, f"expected {code}, got {e.status}: {e.body}"
        return
    raise AssertionError(f"expected ApiException {code}")


def pod(name, labels):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(containers=[
            client.V1Container(name="c", image="kplane/pause",
                               env=[client.V1EnvVar(name="A", value="1")])]),
    )


def pods(core):
    created = core.create_namespaced_pod(NS, pod("py-a", {"app": "py", "tier": "front"}))
    assert created.metadata.uid and created.spec.restart_policy == "Always"
    core.create_namespaced_pod(NS, pod("py-b", {"app": "py", "tier": "back"}))
    got = core.read_namespaced_pod("py-a", NS)
    assert got.metadata.labels["tier"] == "front"
    listed = core.list_namespaced_pod(NS, label_selector="app=py,tier in (back)")
    assert [p.metadata.name for p in listed.items] == ["py-b"], listed.items
    assert len(core.list_pod_for_all_namespaces(label_selector="app=py").items) == 2
    first = core.list_namespaced_pod(NS, limit=1)
    assert first.metadata.remaining_item_count == 1 and first.metadata._continue, first.metadata
    rest = core.list_namespaced_pod(NS, limit=1, _continue=first.metadata._continue)
    assert [p.metadata.name for p in first.items + rest.items] == ["py-a", "py-b"]
    assert rest.metadata._continue is None and rest.metadata.remaining_item_count is None

    got.metadata.labels["tier"] = "middle"
    replaced = core.replace_namespaced_pod("py-a", NS, got)
    assert replaced.metadata.labels["tier"] == "middle"
    stale = got  # still carries the old resourceVersion
    expect_status(409, core.replace_namespaced_pod, "py-a", NS, stale)

    merged = core.patch_namespaced_pod(
        "py-a", NS, {"metadata": {"labels": {"merged": "yes"}}},
        _content_type="application/merge-patch+json")
    assert merged.metadata.labels["merged"] == "yes"
    strategic = core.patch_namespaced_pod(
        "py-a", NS, {"spec": {"containers": [{"name": "c", "image": "kplane/agnhost"}]}})
    assert strategic.spec.containers[0].image == "kplane/agnhost"
    assert strategic.spec.containers[0].env[0].name == "A", "strategic merge keeps env"

    # A status written without a condition's `status` reads back with it empty, as Go writes
    # the decoded condition: the client, which requires the field, can still list the pod.
    gate = {"status": {"conditions": [{"type": "example.com/gate"}]}}
    core.patch_namespaced_pod_status("py-b", NS, gate, _preload_content=False)
    listed = core.list_namespaced_pod(NS, label_selector="app=py,tier in (back)")
    conditions = {c.type: c.status for c in listed.items[0].status.conditions}
    assert conditions["example.com/gate"] == "", conditions
    bad = {"status": {"conditions": [{"type": "bad type!", "status": "True"}]}}
    expect_status(422, core.patch_namespaced_pod_status, "py-b", NS, bad)

    expect_status(404, core.read_namespaced_pod, "missing", NS)
    expect_status(409, core.create_namespaced_pod, NS, pod("py-a", {}))
    invalid = client.V1Pod(metadata=client.V1ObjectMeta(name="Bad_Name"),
                           spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")]))
    expect_status(422, core.create_namespaced_pod, NS, invalid)

    core.delete_namespaced_pod("py-a", NS)
    core.delete_namespaced_pod("py-b", NS)
    expect_status(404, core.read_namespaced_pod, "py-a", NS)


def services(core):
    svc = client.V1Service(
        metadata=client.V1ObjectMeta(name="py-svc", labels={"app": "py"}),
        spec=client.V1ServiceSpec(selector={"app": "py"},
                                  ports=[client.V1ServicePort(port=80, target_port=8080)]))
    created = core.create_namespaced_service(NS, svc)
    assert created.spec.ports[0].protocol == "TCP"
    patched = core.patch_namespaced_service("py-svc", NS, {"metadata": {"labels": {"x": "y"}}})
    assert patched.metadata.labels == {"app": "py", "x": "y"}
    assert [s.metadata.name for s in core.list_namespaced_service(NS, label_selector="x=y").items] == ["py-svc"]
    core.delete_namespaced_service("py-svc", NS)
    expect_status(404, core.read_namespaced_service, "py-svc", NS)


def config_maps_and_secrets(core):
    core.create_namespaced_pod(NS, pod("py-gone", {}))
    core.create_namespaced_config_map(NS, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="py-cm"), data={"a": "1"}))
    core.create_namespaced_secret(NS, client.V1Secret(
        metadata=client.V1ObjectMeta(name="py-secret"), string_data={"password": "hunter2"}))
    assert core.read_namespaced_secret("py-secret", NS).data == {"password": "aHVudGVyMg=="}
    # Deleting these answers a Success Status, as Kubernetes does (pods answer the pod); the
    # client hands either back as a dict.
    gone = core.delete_namespaced_config_map("py-cm", NS)
    assert gone["status"] == "Success" and gone["details"]["name"] == "py-cm", gone
    gone = core.delete_namespaced_secret("py-secret", NS)
    assert gone["status"] == "Success" and gone["details"]["kind"] == "secrets", gone
    assert core.delete_namespaced_pod("py-gone", NS, grace_period_seconds=0).kind == "Pod"


def replication_controllers(core):
    rc = client.V1ReplicationController(
        metadata=client.V1ObjectMeta(name="py-rc"),
        spec=client.V1ReplicationControllerSpec(
            replicas=2, selector={"app": "py-rc"},
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "py-rc"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="kplane/pause")]))))
    core.create_namespaced_replication_controller(NS, rc)
    scale = core.read_namespaced_replication_controller_scale("py-rc", NS)
    assert scale.spec.replicas == 2 and scale.status.selector == "app=py-rc", scale
    scaled = core.patch_namespaced_replication_controller_scale("py-rc", NS, {"spec": {"replicas": 5}})
    assert scaled.spec.replicas == 5
    assert core.read_namespaced_replication_controller("py-rc", NS).spec.replicas == 5
    bad = client.V1ReplicationController(
        metadata=client.V1ObjectMeta(name="py-bad"),
        spec=client.V1ReplicationControllerSpec(
            replicas=-1, selector={"app": "x"},
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "x"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")]))))
    expect_status(422, core.create_namespaced_replication_controller, NS, bad)
    core.delete_namespaced_replication_controller("py-rc", NS)


def watching(core):
    start = core.list_namespaced_pod(NS).metadata.resource_version
    seen = []
    ready = threading.Event()

    def follow():
        w = watch.Watch()
        ready.set()
        for event in w.stream(core.list_namespaced_pod, NS, resource_version=start,
                              label_selector="app=watched", timeout_seconds=20):
            seen.append((event["type"], event["object"].metadata.name))
            if event["type"] == "DELETED":
                w.stop()

    thread = threading.Thread(target=follow)
    thread.start()
    ready.wait()
    core.create_namespaced_pod(NS, pod("py-w", {"app": "watched"}))
    core.patch_namespaced_pod("py-w", NS, {"metadata": {"labels": {"more": "1"}}})
    core.delete_namespaced_pod("py-w", NS)
    thread.join(30)
    assert not thread.is_alive(), "the watch never saw the deletion"
    # A scheduler, when one runs, may add MODIFIED events of its own (binding).
    kinds = [kind for kind, name in seen if name == "py-w"]
    assert kinds[0] == "ADDED" and kinds[-1] == "DELETED" and "MODIFIED" in kinds[1:-1], seen


def events(api, core):
    """events.k8s.io/v1 events are core/v1 events: written through one, read through both."""
    import datetime
    now = datetime.datetime.now(datetime.timezone.utc)
    event = client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="py-ev"),
        event_time=now, reporting_controller="example.com/py", reporting_instance="py-1",
        action="Testing", reason="Checked", type="Normal", note="written as events.k8s.io/v1",
        regarding=client.V1ObjectReference(kind="Pod", name="py-p", namespace=NS))
    created = api.create_namespaced_event(NS, event)
    assert created.regarding.name == "py-p" and created.event_time == now, created
    legacy = core.read_namespaced_event("py-ev", NS)
    assert legacy.message == "written as events.k8s.io/v1", legacy
    assert legacy.involved_object.name == "py-p" and legacy.reporting_component == "example.com/py"
    listed = api.list_namespaced_event(NS, field_selector="regarding.name=py-p")
    assert [e.metadata.name for e in listed.items] == ["py-ev"], listed
    expect_status(400, api.list_namespaced_event, NS, field_selector="involvedObject.name=py-p")
    # Through events.k8s.io/v1 only the series may change (the note is immutable there)...
    series = {"series": {"count": 2, "lastObservedTime": now.isoformat()}}
    patched = api.patch_namespaced_event("py-ev", NS, series)
    assert patched.series.count == 2, patched
    expect_status(422, api.patch_namespaced_event, "py-ev", NS, {"note": "changed"})
    # ...through core/v1 the message may.
    core.patch_namespaced_event("py-ev", NS, {"message": "changed"})
    assert api.read_namespaced_event("py-ev", NS).note == "changed"
    bad = client.EventsV1Event(metadata=client.V1ObjectMeta(name="py-bad"), event_time=now,
                               reporting_controller="x", reporting_instance="y", action="z",
                               reason="r", type="Odd")
    expect_status(422, api.create_namespaced_event, NS, bad)
    api.delete_namespaced_event("py-ev", NS)
    expect_status(404, core.read_namespaced_event, "py-ev", NS)


def reviews(api):
    """Access reviews: the insecure port's own user may do anything; a review about another
    user is the authorizer's (RBAC's) answer for that user."""
    authz = client.AuthorizationV1Api(api)
    attributes = client.V1ResourceAttributes(namespace=NS, verb="delete", resource="pods")
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes))
    answered = authz.create_self_subject_access_review(review)
    assert answered.status.allowed is True and answered.spec.resource_attributes.verb == "delete"
    local = client.V1LocalSubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user="bob", resource_attributes=attributes))
    assert authz.create_namespaced_local_subject_access_review(NS, local).status.allowed is False
    local.spec.groups = ["system:masters"]
    assert authz.create_namespaced_local_subject_access_review(NS, local).status.allowed is True
    nobody = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        resource_attributes=attributes))
    expect_status(422, authz.create_subject_access_review, nobody)
    rules = client.V1SelfSubjectRulesReview(spec=client.V1SelfSubjectRulesReviewSpec(namespace=NS))
    status = authz.create_self_subject_rules_review(rules).status
    assert status.resource_rules[0].verbs == ["*"] and status.incomplete is False, status


def custom_scheduler(core, node):
    """A scheduler of its own binds its pods through the namespace's `bindings`."""
    custom = pod("custom-sched", {"app": "custom"})
    custom.spec.scheduler_name = "my-scheduler"
    core.create_namespaced_pod(NS, custom)
    assert core.read_namespaced_pod("custom-sched", NS).spec.node_name is None
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="custom-sched"),
                            target=client.V1ObjectReference(kind="Node", name=node))
    # The answer is a Status, which the client cannot read as the V1Binding it expects (as
    # with Kubernetes): read raw.
    reply = core.create_namespaced_binding(NS, body, _preload_content=False)
    assert reply.status == 201, reply.status
    assert core.read_namespaced_pod("custom-sched", NS).spec.node_name == node
    expect_status(409, core.create_namespaced_binding, NS, body, _preload_content=False)
    core.delete_namespaced_pod("custom-sched", NS, grace_period_seconds=0)


def wait_for_phase(core, name, phase):
    """Waits up to a minute for pod `name` to reach `phase`; returns that minute's deadline."""
    deadline = time.monotonic() + 60
    while core.read_namespaced_pod(name, NS).status.phase != phase:
        assert time.monotonic() < deadline, f"{name} never reached {phase}"
        time.sleep(0.1)
    return deadline


def exec_in_pods(core, node):
    """exec over the WebSocket the client opens (its stdin sent as text frames)."""
    box = pod("exec-box", {"app": "exec"})
    box.spec.node_name = node
    core.create_namespaced_pod(NS, box)
    wait_for_phase(core, "exec-box", "Running")
    out = stream(core.connect_get_namespaced_pod_exec, "exec-box", NS,
                 command=["sh", "-c", "echo out $A; echo err >&2"],
                 stdout=True, stderr=True, stdin=False, tty=False)
    assert out == "out 1\nerr\n", repr(out)
    # Only the streams asked for: stderr not asked for goes nowhere.
    quiet = stream(core.connect_get_namespaced_pod_exec, "exec-box", NS,
                   command=["sh", "-c", "echo out; echo err >&2"],
                   stdout=True, stderr=False, stdin=False, tty=False)
    assert quiet == "out\n", repr(quiet)
    session = stream(core.connect_get_namespaced_pod_exec, "exec-box", NS,
                     command=["sh", "-c", "read x; echo got $x; exit 4"],
                     stdout=True, stderr=True, stdin=True, tty=False, _preload_content=False)
    session.write_stdin("abc\n")
    session.run_forever(timeout=30)
    assert session.read_stdout() == "got abc\n"
    assert session.returncode == 4, session.returncode
    # The client sends each write as one message: one of 1 MiB arrives whole, as the
    # kubelet takes messages up to 32 MiB.
    counted = stream(core.connect_get_namespaced_pod_exec, "exec-box", NS, command=["wc", "-c"],
                     stdout=True, stderr=True, stdin=True, tty=False, _preload_content=False)
    counted.write_stdin("x" * (1 << 20))
    counted.close_channel(0)
    counted.run_forever(timeout=30)
    assert counted.read_stdout().strip() == str(1 << 20), counted.read_channel(3)
    assert counted.returncode == 0, counted.returncode
    # A command that cannot start: the error channel carries kube's 500 Status, details too.
    missing = stream(core.connect_get_namespaced_pod_exec, "exec-box", NS,
                     command=["no-such-command"], stdout=True, stderr=True, stdin=False,
                     tty=False, _preload_content=False)
    missing.run_forever(timeout=30)
    failure = json.loads(missing.read_channel(3))
    assert failure["code"] == 500 and failure["reason"] == "InternalError", failure
    assert failure["message"] == ('Internal error occurred: error executing command in '
                                  'container: exec: "no-such-command": executable file not '
                                  'found in $PATH'), failure
    assert failure["details"]["causes"][0]["message"].startswith("error executing"), failure
    # A container that is not running: the upgrade is taken (kube-apiserver's stream
    # translator), and the agent's refusal is the final status, not a failed handshake.
    done = client.V1Pod(
        metadata=client.V1ObjectMeta(name="exec-done"),
        spec=client.V1PodSpec(node_name=node, restart_policy="Never", containers=[
            client.V1Container(name="c", image="kplane/pause", command=["true"])]))
    core.create_namespaced_pod(NS, done)
    wait_for_phase(core, "exec-done", "Succeeded")
    refused = stream(core.connect_get_namespaced_pod_exec, "exec-done", NS, command=["ls"],
                     stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False)
    refused.run_forever(timeout=30)
    why = json.loads(refused.read_channel(3))
    assert why["code"] == 500 and why["reason"] == "InternalError", why
    assert why["message"] == ('Internal error occurred: unable to upgrade connection: '
                              'container not found ("c")'), why
    on_terminal = stream(core.connect_get_namespaced_pod_exec, "exec-box", NS,
                         command=["sh", "-c", "tty; echo err >&2"],
                         stdout=True, stderr=False, stdin=False, tty=True)
    assert on_terminal.startswith("/dev/pts/") and on_terminal.endswith("\r\nerr\r\n"), \
        repr(on_terminal)


def attach_to_pods(core, node):
    """attach to a container's stdin (stdinOnce: it closes when the client leaves)."""
    reader = client.V1Pod(
        metadata=client.V1ObjectMeta(name="attach-box"),
        spec=client.V1PodSpec(node_name=node, restart_policy="Never", containers=[
            client.V1Container(name="c", image="kplane/pause", stdin=True, stdin_once=True,
                               command=["sh", "-c", "read x; echo got $x; read y; echo y=$y"])]))
    core.create_namespaced_pod(NS, reader)
    deadline = wait_for_phase(core, "attach-box", "Running")
    session = stream(core.connect_get_namespaced_pod_attach, "attach-box", NS,
                     stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False)
    session.write_stdin("abc\n")
    shown = ""
    while "got abc" not in shown:
        assert time.monotonic() < deadline, repr(shown)
        session.update(timeout=1)
        shown += session.read_stdout()
    session.close()
    # The client left: the container's stdin ended, so its second read got nothing.
    wait_for_phase(core, "attach-box", "Succeeded")
    assert core.read_namespaced_pod_log("attach-box", NS) == "got abc\ny=\n"
    core.delete_namespaced_pod("attach-box", NS)
    # Each stream on its own channel, and only those asked for.
    talker = client.V1Pod(
        metadata=client.V1ObjectMeta(name="attach-talker"),
        spec=client.V1PodSpec(node_name=node, termination_grace_period_seconds=1, containers=[
            client.V1Container(name="c", image="kplane/pause", command=[
                "sh", "-c", "while true; do echo OUT; echo ERR >&2; sleep 0.2; done"])]))
    core.create_namespaced_pod(NS, talker)
    deadline = wait_for_phase(core, "attach-talker", "Running")
    both = stream(core.connect_get_namespaced_pod_attach, "attach-talker", NS,
                  stdin=False, stdout=True, stderr=True, tty=False, _preload_content=False)
    out, err = "", ""
    while "OUT" not in out or "ERR" not in err:
        assert time.monotonic() < deadline, (out, err)
        both.update(timeout=1)
        out += both.read_stdout()
        err += both.read_stderr()
    both.close()
    assert set(out.split()) == {"OUT"} and set(err.split()) == {"ERR"}, (out, err)
    errors = stream(core.connect_get_namespaced_pod_attach, "attach-talker", NS,
                    stdin=False, stdout=False, stderr=True, tty=False, _preload_content=False)
    err, out = "", ""
    while err.count("ERR") < 3:
        assert time.monotonic() < deadline, (out, err)
        errors.update(timeout=1)
        out += errors.read_stdout()
        err += errors.read_stderr()
    errors.close()
    assert out == "", out
    core.delete_namespaced_pod("attach-talker", NS)


def port_forward(core, node):
    """port-forward in the channel protocol the client speaks (v4.channel.k8s.io)."""
    web = client.V1Pod(
        metadata=client.V1ObjectMeta(name="pf-web"),
        spec=client.V1PodSpec(node_name=node, termination_grace_period_seconds=1, containers=[
            client.V1Container(name="c", image="kplane/agnhost", args=["serve-hostname"])]))
    core.create_namespaced_pod(NS, web)
    deadline = wait_for_phase(core, "pf-web", "Running")
    # The process runs before it listens: a refused dial is told on the port's error channel.
    while True:
        forwarded = portforward(core.connect_get_namespaced_pod_portforward, "pf-web", NS,
                                ports="9376")
        connection = forwarded.socket(9376)
        connection.setblocking(True)
        answer = b""
        try:
            connection.sendall(b"GET / HTTP/1.0\r\n\r\n")
            while chunk := connection.recv(4096):
                answer += chunk
        except (BrokenPipeError, ConnectionResetError):
            # The refused dial may close the stream before the request is written.
            pass
        connection.close()
        error = forwarded.error(9376)
        forwarded.close()
        if error is None:
            break
        assert "refused" in error and time.monotonic() < deadline, error
        time.sleep(0.2)
    assert answer.endswith(b"pf-web"), answer
    core.delete_namespaced_pod("pf-web", NS)


def metrics_and_eviction(api, core):
    """The running exec-box's metrics (metrics.k8s.io, as kubectl top reads them), then its
    eviction: refused while a disruption budget needs it, done once the budget is gone."""
    metrics = client.CustomObjectsApi(api)
    deadline = time.monotonic() + 60
    while True:
        listed = metrics.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", NS, "pods")
        named = [m for m in listed["items"] if m["metadata"]["name"] == "exec-box"]
        if named:
            break
        assert time.monotonic() < deadline, f"no metrics for exec-box: {listed}"
        time.sleep(0.2)
    usage = named[0]["containers"][0]["usage"]
    # Quantities as metrics-server writes them ("0", "1500u", "32648Ki"), which the client reads.
    assert parse_quantity(usage["cpu"]) >= 0 and parse_quantity(usage["memory"]) > 0, usage

    policy = client.PolicyV1Api(api)
    budget = client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="exec-budget"),
        spec=client.V1PodDisruptionBudgetSpec(
            min_available=1,
            selector=client.V1LabelSelector(match_labels={"app": "exec"})))
    policy.create_namespaced_pod_disruption_budget(NS, budget)
    while policy.read_namespaced_pod_disruption_budget("exec-budget", NS).status.current_healthy != 1:
        assert time.monotonic() < deadline, "the budget never counted exec-box"
        time.sleep(0.1)
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="exec-box", namespace=NS))
    try:
        core.create_namespaced_pod_eviction("exec-box", NS, eviction)
        raise AssertionError("the budget allows no eviction")
    except ApiException as e:
        assert e.status == 429 and "disruption budget" in e.body, e.body
    policy.delete_namespaced_pod_disruption_budget("exec-budget", NS)
    core.create_namespaced_pod_eviction("exec-box", NS, eviction)
    try:
        going = core.read_namespaced_pod("exec-box", NS)
        assert going.metadata.deletion_timestamp is not None, going.metadata
    except ApiException as e:
        assert e.status == 404, e.body  # already stopped and gone


def secure_port(url, ca_file, token):
    """The secure port over verified TLS: a bearer token is its user; a wrong one is 401."""
    config = client.Configuration()
    config.host = url
    config.ssl_ca_cert = ca_file
    config.api_key = {"authorization": token}
    config.api_key_prefix = {"authorization": "Bearer"}
    secured = client.ApiClient(config)
    names = [ns.metadata.name for ns in client.CoreV1Api(secured).list_namespace().items]
    assert "kube-system" in names, names
    review = client.AuthenticationV1Api(secured).create_self_subject_review(
        client.V1SelfSubjectReview())
    assert review.status.user_info.username == "root", review.status
    config.api_key = {"authorization": "not-a-token"}
    expect_status(401, client.CoreV1Api(client.ApiClient(config)).list_namespace)


def main():
    api = api_client(sys.argv[1])
    core = client.CoreV1Api(api)
    pods(core)
    services(core)
    config_maps_and_secrets(core)
    replication_controllers(core)
    watching(core)
    events(client.EventsV1Api(api), core)
    reviews(api)
    custom_scheduler(core, sys.argv[2])
    exec_in_pods(core, sys.argv[2])
    attach_to_pods(core, sys.argv[2])
    port_forward(core, sys.argv[2])
    metrics_and_eviction(api, core)
    if len(sys.argv) > 3:
        secure_port(sys.argv[3], sys.argv[4], sys.argv[5])
    print("python client: all checks passed")


if __name__ == "__main__":
    main()
