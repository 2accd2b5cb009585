"""The Jupyter kernel bench/run.py measures against: an ipykernel under
/usr/bin/python3 from a kernel spec made on the fly, with bounded waits.
"""
import json
import os
import queue
import signal
import time

from bench_common import SYS_PY, child_env


class Kernel:
    """An ipykernel under /usr/bin/python3 from a kernel spec made on the
    fly, with bounded waits and a shutdown that always happens."""

    NAME = "agentz-bench-py3"

    def __init__(self, bench):
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager
        self.bench = bench
        kdir = os.path.join(bench.tmp, "kernels")
        spec = os.path.join(kdir, self.NAME)
        os.makedirs(spec, exist_ok=True)
        with open(os.path.join(spec, "kernel.json"), "w") as f:
            json.dump({
                "argv": [SYS_PY, "-m", "ipykernel_launcher", "-f",
                         "{connection_file}"],
                "display_name": "agentz bench (/usr/bin/python3)",
                "language": "python",
                "env": {"PYDEVD_DISABLE_FILE_VALIDATION": "1"},
            }, f)
        ksm = KernelSpecManager(kernel_dirs=[kdir])
        self.km = KernelManager(kernel_name=self.NAME,
                                kernel_spec_manager=ksm)
        self.kc = None
        self.log = open(os.path.join(bench.tmp, "kernel.log"), "ab")
        bench.kernels.append(self)

    def start(self):
        self.km.start_kernel(env=child_env(
            PYDEVD_DISABLE_FILE_VALIDATION="1"),
            stdout=self.log, stderr=self.log)
        self.reconnect(timeout=60)

    def reconnect(self, timeout):
        if self.kc is not None:
            self.kc.stop_channels()
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=timeout)
        except RuntimeError as e:
            raise TimeoutError(f"kernel not ready: {e}") from None

    def send(self, code):
        return self.kc.execute(code, silent=False, store_history=False)

    def _get(self, chan, deadline):
        rem = deadline - time.monotonic()
        if rem <= 0:
            raise TimeoutError
        try:
            return chan(timeout=rem)
        except queue.Empty:
            raise TimeoutError from None

    def wait_reply(self, msg_id, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                m = self._get(self.kc.get_shell_msg, deadline)
            except TimeoutError:
                raise TimeoutError(f"no execute_reply within {timeout} s") \
                    from None
            if m["parent_header"].get("msg_id") == msg_id:
                return m, time.perf_counter()

    def _wait_status(self, msg_id, state, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                m = self._get(self.kc.get_iopub_msg, deadline)
            except TimeoutError:
                raise TimeoutError(f"no '{state}' status within {timeout} s")\
                    from None
            if m["msg_type"] == "status" and \
                    m["parent_header"].get("msg_id") == msg_id and \
                    m["content"].get("execution_state") == state:
                return

    def wait_busy(self, msg_id, timeout):
        self._wait_status(msg_id, "busy", timeout)

    def wait_idle(self, msg_id, timeout):
        self._wait_status(msg_id, "idle", timeout)

    def execute_wait(self, code, timeout):
        t_end = time.monotonic() + timeout
        msg_id = self.send(code)
        reply, _ = self.wait_reply(msg_id, timeout)
        self.wait_idle(msg_id, max(0.1, t_end - time.monotonic()))
        return reply

    def close(self):
        pid = None
        try:
            prov = getattr(self.km, "provisioner", None)
            proc = getattr(prov, "process", None) if prov else None
            pid = proc.pid if proc is not None else None
        except Exception:
            pass
        try:
            if self.kc is not None:
                self.kc.stop_channels()
        except Exception:
            pass
        try:
            if self.km.has_kernel:
                self.km.shutdown_kernel(now=True)
        except Exception:
            pass
        if pid is not None:   # belt and braces: the kernel's own group
            for target in (lambda: os.killpg(pid, signal.SIGKILL),
                           lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    target()
                except (ProcessLookupError, PermissionError, OSError):
                    pass
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        try:
            self.km.cleanup_resources()
        except Exception:
            pass
        try:
            self.log.close()
        except Exception:
            pass
        if self in self.bench.kernels:
            self.bench.kernels.remove(self)
