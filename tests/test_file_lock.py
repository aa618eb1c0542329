"""``core.io.file_lock``: the one inter-process lock the model export, the shared Prefect server and the MLflow store
setup hold."""

from __future__ import annotations

import subprocess
import sys
import time

from core.io import file_lock

HOLDER = """
import sys, time
from core.io import file_lock
with file_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_second_process_waits_until_the_first_releases(tmp_path):
    lock = tmp_path / "sub" / "x.lock"                      # its folder is created
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), "1.5"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    with file_lock(lock):
        waited = time.monotonic() - started
    assert holder.wait(30) == 0
    assert waited > 0.5, "the lock was taken while another process held it"


def test_a_holder_that_dies_releases_it(tmp_path):
    lock = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), "60"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(30)
    with file_lock(lock):                                    # the kernel dropped the dead holder's lock
        pass
