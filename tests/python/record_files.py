"""Writers of TFRecord shards and their .idx files in Python's own code (no TensorFlow), for the tests
of the TFRecord source: the CRC-32C and protobuf encodings below follow the formats' specifications,
independently of hdmlp's C++ readers (tests/cpp/tfrecord_source_test.cc checks the C++ side against
the standard's CRC test vectors, and DLIO's TensorFlow-written shards are read in test_dlio.py)."""
import struct


def _crc32c_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for byte in data:
        c = (c >> 8) ^ _TABLE[(c ^ byte) & 0xFF]
    return c ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload: bytes) -> bytes:
    """One TFRecord record: length, masked CRC of the length, payload, masked CRC of the payload."""
    length = struct.pack("<Q", len(payload))
    return length + struct.pack("<I", masked_crc(length)) + payload + struct.pack("<I", masked_crc(payload))


def write_shard(path, payloads, index_path=None):
    """Writes the records; with index_path, also tfrecord2idx's index (offset and length per line).
    Returns each record's offset."""
    offsets, data = [], bytearray()
    for p in payloads:
        offsets.append(len(data))
        data += record(p)
    with open(path, "wb") as f:
        f.write(data)
    if index_path is not None:
        with open(index_path, "w") as f:
            for k, off in enumerate(offsets):
                end = offsets[k + 1] if k + 1 < len(offsets) else len(data)
                f.write(f"{off} {end - off}\n")
    return offsets


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1  # negative int64s are 10-byte varints
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def example(features: dict) -> bytes:
    """A serialized tf.train.Example: {name: bytes | [bytes] | int | [int] | float | [float]}."""
    entries = b""
    for name, value in features.items():
        values = value if isinstance(value, list) else [value]
        if all(isinstance(v, (bytes, bytearray)) for v in values):
            feature = _field(1, b"".join(_field(1, bytes(v)) for v in values))
        elif all(isinstance(v, int) for v in values):
            feature = _field(3, _field(1, b"".join(_varint(v) for v in values)))  # packed
        else:
            feature = _field(2, _field(1, b"".join(struct.pack("<f", v) for v in values)))
        entries += _field(1, _field(1, name.encode()) + _field(2, feature))
    return _field(1, entries)
