#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz (corpus/<target>/): cache files built here with their
CRC-32C, and protobuf requests encoded by protoc from seeds/<target>/*.txtpb. Rerun after a
format change:  tests/fuzz/make_corpus.py  (needs protoc)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# The validators of cache_file_fuzzer's cache: entries of these files reach CheckEntry.
VALIDATORS = [("kerneld_version", "0.1.0"), ("driver_version", ""), ("runtime_version", ""),
              ("device", "cpu (fuzz)"), ("arch", "x86_64")]
KEY = "gemm:nt:e4m3fn.e4m3fn>bf16:m{m}:n256:k256:g1:x86_64:v1:cpu (fuzz)"


def cache_file(entries, validators=VALIDATORS, version="1", count=None, crc=True, eol="\n"):
    lines = ["kerneld-autotune-cache\t" + version]
    lines += [k + "\t" + v for k, v in validators]
    lines.append("entries\t%d" % (len(entries) if count is None else count))
    lines += ["\t".join(e) for e in entries]
    body = (eol.join(lines) + eol).encode()
    if crc is True:
        return body + b"crc32c\t%08x" % crc32c(body)
    return body if crc is False else body + crc


def entry(m, config="tn64", seconds="9.27e-05", default="9.24e-05", noise="9.2e-06",
          pinned="0", updated="1795760035"):
    return [KEY.format(m=m), config, seconds, default, noise, pinned, updated]


CACHE_SEEDS = {
    "empty": cache_file([]),
    "two_entries": cache_file([entry(64), entry(128, "tn128")]),
    "pinned": cache_file([entry(128, "tn32", "0", "0", "0", "1")]),
    "unknown_config": cache_file([entry(64, "tn7")]),
    "foreign_device_key": cache_file([[KEY.format(m=64).replace("cpu (fuzz)", "NVIDIA H100"),
                                       "tn64", "1e-4", "1e-4", "0", "0", "1"]]),
    "bad_checksum": cache_file([entry(64)], crc=b"crc32c\t00000000"),
    "truncated": cache_file([entry(64)], crc=False),
    "version_2": cache_file([entry(64)], version="2"),
    "driver_mismatch": cache_file([entry(64)], validators=[("kerneld_version", "0.1.0"),
                                                           ("driver_version", "550.54"),
                                                           ("runtime_version", "12.4"),
                                                           ("device", "cpu (fuzz)"),
                                                           ("arch", "x86_64")]),
    "short_line": cache_file([entry(64)[:4]]),
    "count_mismatch": cache_file([entry(64)], count=3),
    "escaped_key": cache_file([[KEY.format(m=64).replace("cpu (fuzz)", "cpu%09(fuzz)%0A"),
                                "tn64", "1", "1", "0", "0", "0"]]),
    "odd_numbers": cache_file([entry(64, seconds="nan", default="inf", noise="-1e308",
                                     updated="-9223372036854775808")]),
    "crlf": cache_file([entry(64)], eol="\r\n"),
    "duplicate_keys": cache_file([entry(64), entry(64, "tn16")]),
    "shape_out_of_class": cache_file([entry(63)]),
}


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    for name, data in CACHE_SEEDS.items():
        write("cache_file", name, data)
    for target, message in (("ring_request", "kerneld.v1.RingRequest"),
                            ("register_buffer", "kerneld.v1.RegisterBufferRequest")):
        seeds = os.path.join(HERE, "seeds", target)
        for name in sorted(os.listdir(seeds)):
            with open(os.path.join(seeds, name), "rb") as f:
                text = f.read()
            data = subprocess.run(
                ["protoc", "--proto_path=" + os.path.join(ROOT, "proto"), "--encode=" + message,
                 "kerneld/v1/kerneld.proto"], input=text, check=True,
                capture_output=True).stdout
            write(target, name[:-len(".txtpb")], data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
