"""A trainer process that dies without closing anything: its session and buffers are gone from
the daemon once the process is killed (SIGKILL: no Python cleanup runs)."""
import os
import signal
import subprocess
import sys
import time

from conftest import HANG_TIMEOUT

CHILD = r"""
import sys, kerneld
kd = kerneld.connect(sys.argv[1], name="doomed")
arrays = [kd.zeros((256, 256), "bf16") for _ in range(3)]
print(kd.session_id, flush=True)
sys.stdin.read()
"""


def test_session_and_buffers_end_when_the_process_is_killed(daemon):
    env = dict(os.environ)
    child = subprocess.Popen([sys.executable, "-c", CHILD, daemon.socket], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        session_id = child.stdout.readline().strip()
        assert session_id, "the child printed no session id"
        sessions = {s["session_id"]: s for s in daemon.status()["sessions"]}
        assert session_id in sessions
        assert sessions[session_id]["client_name"] == "doomed"
        assert sessions[session_id]["buffers"] >= 1
        child.send_signal(signal.SIGKILL)
        child.wait(HANG_TIMEOUT)
        deadline = time.monotonic() + HANG_TIMEOUT
        while True:
            status = daemon.status()
            ids = [s["session_id"] for s in status["sessions"]]
            if session_id not in ids:
                break
            assert time.monotonic() < deadline, f"session {session_id} still listed: {status}"
            time.sleep(0.1)
        # Nothing of the dead session's is left: every remaining buffer belongs to a live one.
        assert status["buffers_registered"] == sum(s["buffers"] for s in status["sessions"])
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
