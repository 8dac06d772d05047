"""Starts moto's server on a free loopback port for the AWS provider's integration tests.

EC2 actions moto lacks and the provider calls (placement groups, capacity reservations) are
added by ``standins.py`` beside this file.

Prints the endpoint (``http://127.0.0.1:<port>``) on its first line of stdout once the server
answers, then serves until its standard input closes (the parent exited or closed the pipe) or it
gets SIGTERM/SIGINT. Fake credentials only: moto never forwards anything to AWS.

Usage: python server.py  (with the virtualenv of scripts/moto/install.sh)
"""

import os
import signal
import sys
import threading

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-west-2")

from moto.server import ThreadedMotoServer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standins  # noqa: E402

standins.install()

stop = threading.Event()


def on_signal(_signum, _frame):
    stop.set()


def watch_stdin():
    # EOF on stdin: the parent is gone.
    try:
        while sys.stdin.read(4096):
            pass
    except Exception:
        pass
    stop.set()


server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
print(f"http://{host}:{port}", flush=True)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
if "--no-stdin" not in sys.argv:
    threading.Thread(target=watch_stdin, daemon=True).start()
stop.wait()
server.stop()
