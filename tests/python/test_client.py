"""The Python `kubernetes` client (>= 37) against `volhealth apiserver`.

Usage: test_client.py KUBECONFIG. Exits non-zero on the first failed check; prints OK at the end.
Covers: list PVCs and read status.health_status.health_conditions, patch status (strategic by
default and merge), patch_csi_node_status, pod volume_health, a 422 on invalid health, and watch.
"""

import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "default"


def main(kubeconfig):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    storage = client.StorageV1Api()

    core.create_namespaced_persistent_volume_claim(NS, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "py-1"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    })

    # A dict body is sent as a strategic merge patch.
    core.patch_namespaced_persistent_volume_claim_status("py-1", NS, {"status": {"healthStatus": {
        "healthConditions": [{"status": "Inaccessible", "reason": "VolumeNotFound", "message": "gone"}]}}})
    items = core.list_persistent_volume_claim_for_all_namespaces().items
    pvc = next(i for i in items if i.metadata.name == "py-1")
    conds = pvc.status.health_status.health_conditions
    assert [(c.status, c.reason) for c in conds] == [("Inaccessible", "VolumeNotFound")], conds

    got = core.patch_namespaced_persistent_volume_claim_status("py-1", NS, {"status": {"healthStatus": {
        "healthConditions": [{"status": "Degraded", "reason": "Slow"}]}}},
        _content_type="application/merge-patch+json")
    assert [(c.status, c.reason) for c in got.status.health_status.health_conditions] == [("Degraded", "Slow")]

    try:
        core.patch_namespaced_persistent_volume_claim_status("py-1", NS, {"status": {"healthStatus": {
            "healthConditions": [{"status": "Bogus", "reason": "X"}]}}})
        raise AssertionError("invalid status accepted")
    except ApiException as e:
        assert e.status == 422, e
        assert "status.healthStatus.healthConditions[0].status" in e.body, e.body

    storage.create_csi_node({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-a"},
                             "spec": {"drivers": [{"name": "d.example.com", "nodeID": "node-a"}]}})
    node = storage.patch_csi_node_status("node-a", {"status": {"storageHealth": [{"name": "d.example.com",
        "healthConditions": [{"status": "StorageUnreachable", "reason": "NoRoute", "volumeMode": "Block"}]}]}})
    sh = node.status.storage_health[0]
    assert sh.name == "d.example.com" and sh.health_conditions[0].reason == "NoRoute", sh

    core.create_namespaced_pod(NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "py-pod"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "py-1"}}]}})
    pod = core.patch_namespaced_pod_status("py-pod", NS, {"status": {"volumeHealth": [{"name": "data",
        "healthConditions": [{"status": "DataLoss", "reason": "Corrupt"}]}]}})
    assert pod.status.volume_health[0].health_conditions[0].reason == "Corrupt"

    # watch.stream without a resourceVersion: synthetic ADDED for what exists.
    w = watch.Watch()
    seen = [(e["type"], e["object"].metadata.name)
            for e in w.stream(core.list_namespaced_persistent_volume_claim, NS, timeout_seconds=2)]
    assert ("ADDED", "py-1") in seen, seen

    # From a list's resourceVersion: the change made after it.
    rv = core.list_namespaced_persistent_volume_claim(NS).metadata.resource_version
    core.patch_namespaced_persistent_volume_claim_status("py-1", NS, {"status": {"healthStatus": {
        "healthConditions": []}}}, _content_type="application/merge-patch+json")
    changes = []
    for e in watch.Watch().stream(core.list_namespaced_persistent_volume_claim, NS,
                                  resource_version=rv, timeout_seconds=2):
        changes.append(e)
        if e["type"] == "MODIFIED":
            break
    assert changes and changes[-1]["type"] == "MODIFIED", changes
    assert not changes[-1]["object"].status.health_status.health_conditions
    print("OK")


if __name__ == "__main__":
    main(sys.argv[1])
