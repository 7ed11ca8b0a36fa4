"""Calls `volhealth health-proxy` in front of a legacy-only driver with grpcio (gRPC C-core) and
default channel options: forwarded calls (GetPluginInfo, CreateVolume, NodeStageVolume), the
capability answer with the health capability added, and the health RPCs the proxy answers from
the driver's legacy VOLUME_CONDITION (NodeGetVolumeHealth with only a volume id).

Usage: grpcio_health_proxy.py PROXY_SOCKET STAGING_PATH; prints OK on success.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

from grpcio_csi import call, field, parse, varint_field  # noqa: E402

GET_VOLUME_HEALTH = 7
LEGACY_VOLUME_CONDITION = 4


def main():
    socket_path, staging = sys.argv[1], sys.argv[2]
    with grpc.insecure_channel("unix:" + socket_path) as channel:
        info = parse(call(channel, "/csi.v1.Identity/GetPluginInfo", b""))
        assert info.get(1, [b""])[0], f"GetPluginInfo returned no name: {info}"
        print("GetPluginInfo: forwarded")

        caps = parse(call(channel, "/csi.v1.Node/NodeGetCapabilities", b""))
        types = set()
        for cap in caps.get(1, []):
            rpc = parse(cap).get(1)
            if rpc:
                types.add(parse(rpc[0]).get(1, [0])[0])
        assert GET_VOLUME_HEALTH in types, f"no GET_VOLUME_HEALTH in {types}"
        assert LEGACY_VOLUME_CONDITION in types, f"the driver's own capability lost: {types}"
        print("NodeGetCapabilities: health added")

        capability = field(2, b"") + field(3, varint_field(1, 1))  # mount, SINGLE_NODE_WRITER
        created = parse(
            call(
                channel,
                "/csi.v1.Controller/CreateVolume",
                field(1, b"grpcio-proxy") + field(3, capability),
            )
        )
        volume_id = parse(created[1][0])[2][0]
        call(
            channel,
            "/csi.v1.Node/NodeStageVolume",
            field(1, volume_id) + field(3, staging.encode()) + field(4, capability),
        )
        print("CreateVolume, NodeStageVolume: forwarded")

        node = parse(call(channel, "/csi.v1.Node/NodeGetVolumeHealth", field(1, volume_id)))
        got = parse(node[1][0])[1][0]
        assert got == volume_id, f"NodeGetVolumeHealth answered for {got!r}"
        print("NodeGetVolumeHealth: answered from the legacy condition")

        health = parse(
            call(channel, "/csi.v1.Controller/ControllerGetVolumeHealth", field(1, volume_id))
        )
        got = parse(health[1][0])[1][0]
        assert got == volume_id, f"ControllerGetVolumeHealth answered for {got!r}"
        print("ControllerGetVolumeHealth: answered from the legacy condition")
    print("OK")


if __name__ == "__main__":
    main()
