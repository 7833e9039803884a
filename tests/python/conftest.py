"""Fixtures of the Python package's tests: a real kerneld daemon process on the CPU backend
(the binary from $KD_KERNELD), clients connected to it, and kctl ($KD_KCTL) for its status."""
import json
import os
import shutil
import sys
import signal
import subprocess
import tempfile
import time

import pytest

import kerneld

# The Llama model of the training benchmark (bench/torch/llama.py), which the torch tests train.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "torch"))


def _binary(env: str) -> str:
    path = os.environ.get(env)
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"${env} must name the built binary (tests/python/run_pytest.sh sets it)")
    return path


# How long a wait for something that takes well under a second may take before a test calls it a
# hang: far beyond a loaded 2-core machine. It bounds waits; no test asserts a speed with it.
HANG_TIMEOUT = 60


class Daemon:
    def __init__(self, directory: str):
        self.dir = directory
        self.socket = os.path.join(directory, "data.sock")
        self.admin = os.path.join(directory, "admin.sock")
        self.log = open(os.path.join(directory, "kerneld.log"), "w")
        self.proc = subprocess.Popen(
            [_binary("KD_KERNELD"), f"--socket={self.socket}", f"--admin_socket={self.admin}",
             "--metrics_address=", "--backend=cpu", "--cpu_threads=2"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + HANG_TIMEOUT
        while not (os.path.exists(self.socket) and os.path.exists(self.admin)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("kerneld did not start; see " + self.log.name)
            time.sleep(0.05)

    def status(self) -> dict:
        out = subprocess.run([_binary("KD_KCTL"), f"--admin_socket={self.admin}", "status",
                              "--json"], check=True, capture_output=True, text=True)
        return json.loads(out.stdout)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(HANG_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def daemon():
    directory = tempfile.mkdtemp(prefix="kd_py.")
    d = Daemon(directory)
    yield d
    d.stop()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def kd(daemon):
    """One client (with its submit ring) for the whole session."""
    client = kerneld.connect(daemon.socket, name="pytest")
    yield client
    client.close()


@pytest.fixture(scope="session")
def runtime(kd):
    """The process's kerneld.torch runtime, on the session's client."""
    from kerneld.torch import default_runtime, set_default_client
    set_default_client(kd)
    return default_runtime()


def sqnr(reference, actual) -> float:
    """Signal-to-quantization-noise ratio in dB, as torchao's tests compute it:
    20 log10(|ref| / |ref - actual|)."""
    import numpy as np
    ref = np.asarray(reference, dtype=np.float64)
    err = ref - np.asarray(actual, dtype=np.float64)
    noise = np.linalg.norm(err)
    if noise == 0:
        return float("inf")
    return float(20 * np.log10(np.linalg.norm(ref) / noise))


def require_torch(major: int, minor: int):
    """torch, or a skip of the calling test module with the reason when this torch is older than
    major.minor (kerneld.torch's custom ops, torch.compile and FSDP2 need it). CI runs these
    modules on PyTorch 2.13, where run_pytest.sh fails any skip."""
    try:
        import torch
    except ImportError:
        pytest.skip("needs torch", allow_module_level=True)
    have = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if have < (major, minor):
        pytest.skip(f"needs torch >= {major}.{minor}, this is {torch.__version__}",
                    allow_module_level=True)
    return torch
