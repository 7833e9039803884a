"""Fixtures of the GPU tests (tests/python/gpu, run by bench/torch/run_gpu.sh on a GPU node):
the daemon named by $KD_SOCKET (the runbook starts it, under MPS or not), or one started here
from $KD_KERNELD on the CUDA backend. Every test here is skipped without a CUDA device."""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

torch = pytest.importorskip("torch")

import kerneld  # noqa: E402

from gpu_util import CUDA  # noqa: E402


@pytest.fixture(scope="session")
def gpu_socket():
    if not CUDA:
        pytest.skip("needs a CUDA device")
    socket = os.environ.get("KD_SOCKET")
    if socket:
        yield socket
        return
    binary = os.environ.get("KD_KERNELD")
    if not binary:
        pytest.fail("set $KD_SOCKET (a running kerneld) or $KD_KERNELD (its binary)")
    directory = tempfile.mkdtemp(prefix="kd_gpu.")
    socket = os.path.join(directory, "data.sock")
    log = open(os.path.join(directory, "kerneld.log"), "w")
    proc = subprocess.Popen([binary, f"--socket={socket}",
                             f"--admin_socket={directory}/admin.sock", "--metrics_address=",
                             "--backend=cuda"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not os.path.exists(socket):
        assert proc.poll() is None and time.monotonic() < deadline, "kerneld did not start"
        time.sleep(0.05)
    yield socket
    proc.terminate()
    proc.wait(10)
    log.close()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def gpu_kd(gpu_socket):
    client = kerneld.connect(gpu_socket, name="pytest-gpu")
    assert client.backend == "cuda", f"the daemon's backend is {client.backend}"
    yield client
    client.close()


@pytest.fixture(scope="session")
def gpu_runtime(gpu_kd):
    """The process's kerneld.torch runtime, on the session's CUDA client."""
    from kerneld.torch import default_runtime, set_default_client
    set_default_client(gpu_kd)
    return default_runtime()

