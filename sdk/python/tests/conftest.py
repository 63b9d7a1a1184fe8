"""Real idemkey servers for the tests, and small helpers.

A server gets a free port and its own temp data dir (embedded SQLite);
readiness is /readyz polled; dev tokens are minted with ``idemkey token`` on
the same data dir; ``kill()`` is SIGKILL and ``start()`` restarts on the same
port. ``IDEMKEY_BIN`` names the binary (default: ../../target/debug/idemkey
relative to sdk/python).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, Iterator, Optional

import httpx
import pytest

import idemkey

SDK_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = SDK_DIR.parent.parent
SCENARIOS_FILE = SDK_DIR.parent / "scenarios.json"
PROTOCOL_DOC = REPO_ROOT / "docs" / "protocol.md"


def idemkey_bin() -> str:
    b = os.environ.get("IDEMKEY_BIN") or str(REPO_ROOT / "target" / "debug" / "idemkey")
    if not os.access(b, os.X_OK):
        raise RuntimeError(f"idemkey binary not found at {b}: run `cargo build --workspace --bins` (or set IDEMKEY_BIN)")
    return b


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class IdemkeyServer:
    def __init__(self, extra_env: Optional[Dict[str, str]] = None) -> None:
        self.port = free_port()
        self.extra_env = dict(extra_env or {})
        self.work_dir = Path(tempfile.mkdtemp(prefix="idemkey-py-"))
        self.data_dir = self.work_dir / "data"
        self.log_file = self.work_dir / "server.log"
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self._tokens: Dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> Dict[str, str]:
        e = dict(os.environ)
        e.update(
            {
                "IDEMKEY_LISTEN": f"127.0.0.1:{self.port}",
                "IDEMKEY_DATA_DIR": str(self.data_dir),
                "RUST_LOG": os.environ.get("RUST_LOG", "warn"),
            }
        )
        e.update(self.extra_env)
        return e

    def _log_tail(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def start(self) -> None:
        """Starts (or restarts) the process and waits until /readyz answers 200."""
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen([idemkey_bin()], env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        until = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"idemkey exited during start-up; log:\n{self._log_tail()}")
            try:
                if httpx.get(f"{self.base_url}/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            if time.monotonic() > until:
                raise RuntimeError(f"idemkey not ready after 30 s; log:\n{self._log_tail()}")
            time.sleep(0.025)

    def kill(self) -> None:
        """SIGKILL, and wait for the process to be gone."""
        p = self.proc
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def stop(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.proc = None
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def token(self, tenant: str, roles: str = "client,viewer,admin") -> str:
        k = f"{tenant}|{roles}"
        with self._lock:
            t = self._tokens.get(k)
            if t is None:
                out = subprocess.run(
                    [idemkey_bin(), "token", "--tenant", tenant, "--roles", roles],
                    env=self.env(),
                    capture_output=True,
                    check=True,
                )
                t = out.stdout.decode().strip()
                self._tokens[k] = t
            return t

    def client(self, tenant: Optional[str] = None, **kw: Any) -> idemkey.Client:
        return idemkey.Client(self.base_url, self.token(tenant or fresh_tenant()), **kw)

    def async_client(self, tenant: Optional[str] = None, **kw: Any) -> idemkey.AsyncClient:
        return idemkey.AsyncClient(self.base_url, self.token(tenant or fresh_tenant()), **kw)


def fresh_tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def server() -> Iterator[IdemkeyServer]:
    """One server shared by the tests that do not kill or reconfigure it."""
    s = IdemkeyServer()
    s.start()
    yield s
    s.stop()


@pytest.fixture()
def own_server() -> Iterator[Callable[..., IdemkeyServer]]:
    """Servers of the test's own (to kill, or with other settings), stopped after it."""
    made = []

    def make(extra_env: Optional[Dict[str, str]] = None) -> IdemkeyServer:
        s = IdemkeyServer(extra_env)
        made.append(s)
        s.start()
        return s

    yield make
    for s in made:
        s.stop()


# ---------------------------------------------------------------- transport hooks

Forward = Callable[[httpx.Request], httpx.Response]
AsyncForward = Callable[[httpx.Request], Awaitable[httpx.Response]]


class HookTransport(httpx.BaseTransport):
    """A real HTTP transport with a hook: ``hook(request, forward)`` returns the
    response (usually ``forward(request)``), or raises an httpx error to make
    the answer look lost."""

    def __init__(self, hook: Callable[[httpx.Request, Forward], httpx.Response]) -> None:
        self.inner = httpx.HTTPTransport()
        self.hook = hook

    def _forward(self, request: httpx.Request) -> httpx.Response:
        r = self.inner.handle_request(request)
        r.read()
        return r

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.hook(request, self._forward)

    def close(self) -> None:
        self.inner.close()


class AsyncHookTransport(httpx.AsyncBaseTransport):
    def __init__(self, hook: Callable[[httpx.Request, AsyncForward], Awaitable[httpx.Response]]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.hook = hook

    async def _forward(self, request: httpx.Request) -> httpx.Response:
        r = await self.inner.handle_async_request(request)
        await r.aread()
        return r

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.hook(request, self._forward)

    async def aclose(self) -> None:
        await self.inner.aclose()


def key_of(request: httpx.Request) -> str:
    """The (decoded) key segment of a /v1/keys/{op}/{key}/... request."""
    from urllib.parse import unquote

    raw = request.url.raw_path.decode().split("?")[0]
    return unquote(raw.split("/v1/keys/")[1].split("/")[1])


class Runner(threading.Thread):
    """Runs ``fn`` in a thread and keeps its result or exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def outcome(self, timeout: float = 60.0) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "the thread did not finish"
        if self.error is not None:
            raise self.error
        return self.result
