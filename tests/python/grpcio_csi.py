"""Calls a CSI driver over its unix socket with grpcio (gRPC C-core) and default channel options.

C-core sends the socket path as the HTTP/2 :authority, which servers built on a strict HTTP/2
stack refuse with RST_STREAM PROTOCOL_ERROR. This script proves the driver serves such a client:
GetPluginInfo, CreateVolume, ControllerGetVolumeHealth, NodeGetVolumeHealth, DeleteVolume.
Messages are encoded by hand (a few fields of csi.proto), so no generated stubs are needed.

Usage: grpcio_csi.py SOCKET_PATH; prints OK on success and exits non-zero otherwise.
"""

import sys

import grpc


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, payload):
    """A length-delimited field (strings and embedded messages)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def varint_field(number, value):
    return varint(number << 3) + varint(value)


def parse(data):
    """Top-level fields of a message as {number: [values]} (bytes or ints)."""
    fields = {}
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            length, i = read_varint(data, i)
            value, i = data[i : i + length], i + length
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def read_varint(data, i):
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def call(channel, method, request):
    rpc = channel.unary_unary(method)
    return rpc(request, timeout=10)


def main():
    socket_path = sys.argv[1]
    # Default options: no grpc.default_authority override, so C-core picks the authority itself.
    with grpc.insecure_channel("unix:" + socket_path) as channel:
        info = parse(call(channel, "/csi.v1.Identity/GetPluginInfo", b""))
        name = info.get(1, [b""])[0].decode()
        assert name, f"GetPluginInfo returned no name: {info}"
        print(f"GetPluginInfo: {name}")

        capability = field(2, b"") + field(3, varint_field(1, 1))  # mount, SINGLE_NODE_WRITER
        created = parse(
            call(
                channel,
                "/csi.v1.Controller/CreateVolume",
                field(1, b"grpcio-interop") + field(3, capability),
            )
        )
        volume = parse(created[1][0])
        volume_id = volume[2][0]
        print(f"CreateVolume: {volume_id.decode()}")

        health = parse(
            call(channel, "/csi.v1.Controller/ControllerGetVolumeHealth", field(1, volume_id))
        )
        got = parse(health[1][0])[1][0]
        assert got == volume_id, f"ControllerGetVolumeHealth answered for {got!r}"
        print("ControllerGetVolumeHealth: ok")

        node = parse(call(channel, "/csi.v1.Node/NodeGetVolumeHealth", field(1, volume_id)))
        got = parse(node[1][0])[1][0]
        assert got == volume_id, f"NodeGetVolumeHealth answered for {got!r}"
        print("NodeGetVolumeHealth: ok")

        call(channel, "/csi.v1.Controller/DeleteVolume", field(1, volume_id))
        print("DeleteVolume: ok")
    print("OK")


if __name__ == "__main__":
    main()
