"""A real ClickHouse HTTP server for tests, served by the chdb engine in a subprocess.

There is no ClickHouse server package for this machine, but the engine in
chdb-core can listen on ClickHouse's HTTP port. In a fresh process that never
imports `chdb`, load `chdb/_chdb.abi3.so` directly, start the listeners from a
config.xml in the working directory, and park the thread on a long query.
This relies on chDB internals: requirements.txt pins chdb-core exactly.

    python tests/chserver.py HTTP_PORT TCP_PORT DATA_DIR WORK_DIR [CONFIG_XML_FRAGMENT]

`Cluster` starts several, each a shard of one `remote_servers` cluster: what the
cluster path (retrieval/store/cluster.py) is tested on. This engine has no
Keeper replication can use (only the in-process testkeeper, and its server sets no
interserver address: docs/operating.md), so its shards have no replicas.
"""

import ctypes
import importlib.machinery
import importlib.util
import os
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, root: str, config: str = "", ports: tuple[int, int] | None = None):
        self.http_port, self.tcp_port = ports or (free_port(), free_port())
        self.url = f"http://127.0.0.1:{self.http_port}"
        os.makedirs(root, exist_ok=True)
        data, work = os.path.join(root, "data"), os.path.join(root, "work")
        self.log = open(os.path.join(root, "server.log"), "wb")  # noqa: SIM115 -- the server's, closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(self.http_port), str(self.tcp_port), data, work, config],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready(timeout=60)

    def _wait_ready(self, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ClickHouse test server exited ({self.process.returncode}); see {self.log.name}")
            try:
                with urllib.request.urlopen(f"{self.url}/ping", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ClickHouse test server did not answer on {self.url} within {timeout}s")

    def stop(self):
        self.process.kill()
        self.process.wait(timeout=10)
        self.log.close()


class Cluster:
    """`shards` servers, each one shard of the cluster `name` in every server's `remote_servers`, each keeping a
    query_log (which statements reached which shard)."""

    def __init__(self, root: str, name: str = "loom", shards: int = 2):
        self.name = name
        ports = [(free_port(), free_port()) for _ in range(shards)]
        replicas = "".join(
            f"<shard><replica><host>127.0.0.1</host><port>{tcp}</port></replica></shard>" for _, tcp in ports
        )
        config = f"<remote_servers><{name}>{replicas}</{name}></remote_servers>"
        config += "<query_log><database>system</database><table>query_log</table></query_log>"  # who read what
        self.servers = []
        try:
            for at, pair in enumerate(ports):
                self.servers.append(Server(os.path.join(root, f"shard{at + 1}"), config, pair))
        except Exception:
            self.stop()
            raise
        self.urls = [server.url for server in self.servers]

    def stop(self):
        for server in self.servers:
            server.stop()


def _serve(http_port: str, tcp_port: str, data: str, work: str, extra: str = ""):
    so = os.path.join(sysconfig.get_paths()["purelib"], "chdb", "_chdb.abi3.so")
    ctypes.CDLL(so, mode=sys.getdlopenflags() | 0x8)  # RTLD_DEEPBIND, as chdb/__init__.py does
    os.chdir(os.path.dirname(so))
    loader = importlib.machinery.ExtensionFileLoader("_chdb", so)
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location("_chdb", so, loader=loader))
    loader.exec_module(module)
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    with open("config.xml", "w") as config:
        config.write(
            f"<clickhouse><http_port>{http_port}</http_port><tcp_port>{tcp_port}</tcp_port>"
            f"<listen_host>127.0.0.1</listen_host>{extra}</clickhouse>"
        )
    parent = os.getppid()

    def exit_with_parent():  # never outlive the test run that started us
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=exit_with_parent, daemon=True).start()
    module.query(
        "SYSTEM START LISTEN HTTP; SYSTEM START LISTEN TCP; "
        "SELECT sleepEachRow(1) FROM numbers(1000000000) SETTINGS max_block_size = 1, max_execution_time = 0",
        "TabSeparated",
        path=data,
    )


if __name__ == "__main__":
    _serve(*sys.argv[1:])
