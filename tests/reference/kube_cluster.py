"""brisk's operator and kube_cluster against an in-memory Kubernetes API.

No real API server can run where the tests run. This stands one in:
kmock's KubernetesEmulator (an in-memory object store that speaks the
Kubernetes REST API, watches included), with the BriskCluster resource
registered. It has no controllers and no kubelet, so this script is the
kubelet: for every Pod and scheduler Deployment the operator creates, it
runs the container's command line as a real brisk process on loopback
(the Service's address mapped to the scheduler's port here), reports the
pod Running, sends SIGTERM when the pod is deleted, and reports the pod
ended when its process exits. Deleting the BriskCluster deletes what it
owns, as Kubernetes' garbage collector would.

Usage: kube_cluster.py BRISK SCRIPT_TEMPLATE OUT_DIR

Runs `brisk operator` and then `brisk run SCRIPT` (the template with
{address} filled in), and prints one JSON line: the session's output, the
operator's log, each worker's name and exit code and whether the pod was
deleted first, and what is left. The Rust test asserts on it.
"""

import asyncio
import json
import os
import signal
import socket
import sys
import time
import uuid

import aiohttp
import kmock

NS = "default"
CRD = "brisk.dev/v1alpha1/briskclusters"


class Emulator(kmock.KubernetesEmulator):
    """The emulator, plus what every API server does on a write and
    watchers rely on: a resourceVersion on each change, and a uid,
    namespace and creationTimestamp on creation."""

    async def _handle(self, request):
        action = getattr(request.action, "value", None)
        if request.resource is not None and action in ("CREATE", "UPDATE") and isinstance(request.data, dict):
            Emulator.version = getattr(Emulator, "version", 0) + 1
            meta = request.data.setdefault("metadata", {})
            meta["resourceVersion"] = str(Emulator.version)
            if action == "CREATE":
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("namespace", request.namespace)
                meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        return await super()._handle(request)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Kubelet:
    def __init__(self, url, brisk, out_dir):
        self.url = url.rstrip("/")
        self.brisk = brisk
        self.out_dir = out_dir
        self.comm, self.http = free_port(), free_port()
        self.scheduler = None
        self.pods = {}  # name -> process
        self.ended = {}  # name -> {"rc", "deleted_first"}
        self.deleted = set()
        self.http_session = None

    def address(self):
        return f"tcp://127.0.0.1:{self.comm}"

    async def req(self, method, path, body=None):
        async with self.http_session.request(method, self.url + path, json=body) as r:
            text = await r.text()
            return r.status, (json.loads(text) if text else None)

    def command(self, container, pod_name=None):
        argv = list(container.get("command", [])) + list(container.get("args", []))
        out = []
        for a in argv:
            a = a.replace(f"tcp://demo-scheduler.{NS}.svc.cluster.local:8786", self.address())
            if pod_name:
                a = a.replace("$(BRISK_WORKER_NAME)", pod_name)
            out.append(a)
        assert out[0] == "brisk", out
        return [self.brisk] + out[1:]

    async def token(self):
        status, secret = await self.req("GET", f"/api/v1/namespaces/{NS}/secrets/demo-token")
        assert status == 200, f"no token secret: {status} {secret}"
        return secret["stringData"]["token"]

    async def spawn(self, argv, name):
        env = dict(os.environ, BRISK_TOKEN=await self.token())
        log = open(os.path.join(self.out_dir, f"{name}.log"), "wb")
        return await asyncio.create_subprocess_exec(*argv, env=env, stdout=log, stderr=log)

    async def start_scheduler(self, deployment):
        c = deployment["spec"]["template"]["spec"]["containers"][0]
        argv = self.command(c)
        # The container listens on 0.0.0.0:8786/8787; here, loopback ports.
        fixed = {"--host": "127.0.0.1", "--port": str(self.comm), "--http-port": str(self.http)}
        for i, a in enumerate(argv):
            if a in fixed:
                argv[i + 1] = fixed[a]
        self.scheduler = await self.spawn(argv, "scheduler")
        # The operator reaches the scheduler where this kubelet put it.
        await self.req(
            "PATCH",
            f"/apis/brisk.dev/v1alpha1/namespaces/{NS}/briskclusters/demo",
            {"metadata": {"annotations": {"brisk.dev/dashboard-url": f"http://127.0.0.1:{self.http}"}}},
        )

    async def step(self):
        status, cr = await self.req("GET", f"/apis/brisk.dev/v1alpha1/namespaces/{NS}/briskclusters/demo")
        if status == 404 and self.scheduler is not None:
            await self.collect_garbage()
        elif self.scheduler is None:
            status, d = await self.req("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/demo-scheduler")
            if status == 200:
                await self.start_scheduler(d)
        status, listing = await self.req("GET", f"/api/v1/namespaces/{NS}/pods")
        pods = {p["metadata"]["name"]: p for p in (listing or {}).get("items", [])}
        for name, pod in pods.items():
            if name in self.pods or name in self.ended:
                continue
            c = pod["spec"]["containers"][0]
            self.pods[name] = await self.spawn(self.command(c, name), name)
            await self.req("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", {"status": {"phase": "Running"}})
        for name, proc in list(self.pods.items()):
            if name not in pods and proc.returncode is None and name not in self.deleted:
                self.deleted.add(name)
                proc.send_signal(signal.SIGTERM)
            if proc.returncode is not None:
                del self.pods[name]
                self.ended[name] = {"rc": proc.returncode, "deleted_first": name in self.deleted}
                if name in pods:
                    phase = "Succeeded" if proc.returncode == 0 else "Failed"
                    await self.req("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", {"status": {"phase": phase}})

    async def collect_garbage(self):
        for path in (
            f"/api/v1/namespaces/{NS}/pods",
            f"/apis/apps/v1/namespaces/{NS}/deployments",
            f"/api/v1/namespaces/{NS}/services",
            f"/api/v1/namespaces/{NS}/secrets",
        ):
            status, listing = await self.req("GET", path)
            for obj in (listing or {}).get("items", []):
                if obj["metadata"].get("labels", {}).get("brisk.dev/cluster") == "demo":
                    await self.req("DELETE", f"{path}/{obj['metadata']['name']}")
        if self.scheduler is not None and self.scheduler.returncode is None:
            self.scheduler.send_signal(signal.SIGTERM)

    async def run(self, stop):
        while not stop.is_set():
            await self.step()
            # Worker processes that exit are noticed on the next step.
            for name, proc in list(self.pods.items()):
                if proc.returncode is None:
                    try:
                        await asyncio.wait_for(proc.wait(), 0.001)
                    except asyncio.TimeoutError:
                        pass
            await asyncio.sleep(0.2)


def kill(proc):
    """Kill a process still running; whether it was."""
    try:
        proc.kill()
        return True
    except ProcessLookupError:
        return False


async def main():
    brisk, template, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    result = {}
    emu = Emulator()
    async with emu, kmock.Server(emu) as srv:
        emu.resources.load_bundled()
        emu.resources[CRD] = {
            "namespaced": True,
            "kind": "BriskCluster",
            "singular": "briskcluster",
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            "shortnames": ["bc"],
            "categories": [],
            "subresources": ["status", "scale"],
        }
        url = str(srv.url)
        kubeconfig = os.path.join(out_dir, "kubeconfig")
        with open(kubeconfig, "w") as f:
            json.dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "emu", "cluster": {"server": url.rstrip("/")}}],
                    "users": [{"name": "test", "user": {"token": "emulator"}}],
                    "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "test", "namespace": NS}}],
                    "current-context": "emu",
                },
                f,
            )
        env = dict(os.environ, KUBECONFIG=kubeconfig)
        kubelet = Kubelet(url, brisk, out_dir)
        script = os.path.join(out_dir, "session.rhai")
        with open(template) as f, open(script, "w") as g:
            g.write(f.read().replace("{address}", kubelet.address()))
        async with aiohttp.ClientSession() as http:
            kubelet.http_session = http
            # A cluster whose spec cannot be made into pods: the operator
            # must say so in its status, and go on with the others.
            await kubelet.req("POST", f"/apis/brisk.dev/v1alpha1/namespaces/{NS}/briskclusters", {
                "apiVersion": "brisk.dev/v1alpha1", "kind": "BriskCluster",
                "metadata": {"name": "bad", "namespace": NS},
                "spec": {"image": "brisk:test", "workers": {"replicas": 1, "resources": {"limits": {"memory": "lots"}}}},
            })
            stop = asyncio.Event()
            kubelet_task = asyncio.create_task(kubelet.run(stop))
            op_log = open(os.path.join(out_dir, "operator.log"), "wb")
            operator = await asyncio.create_subprocess_exec(
                brisk, "operator", "--namespace", NS, env=env, stdout=op_log, stderr=op_log
            )
            started = time.monotonic()
            session = await asyncio.create_subprocess_exec(
                brisk, "run", "--no-progress", script, env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
            try:
                out, err = await asyncio.wait_for(session.communicate(), 240)
            except asyncio.TimeoutError:
                session.kill()
                out, err = await session.communicate()
                err += b"\n(the session timed out)"
            result["session_rc"] = session.returncode
            result["session_out"] = out.decode(errors="replace")
            result["session_err"] = err.decode(errors="replace")
            result["session_s"] = round(time.monotonic() - started, 1)
            # Let the kubelet see the cluster's deletion through.
            deadline = time.monotonic() + 30
            while (kubelet.pods or (kubelet.scheduler and kubelet.scheduler.returncode is None)) and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            operator.send_signal(signal.SIGTERM)
            try:
                result["operator_rc"] = await asyncio.wait_for(operator.wait(), 15)
            except asyncio.TimeoutError:
                operator.kill()
                result["operator_rc"] = "hung"
            stop.set()
            await kubelet_task
            for name, proc in list(kubelet.pods.items()):
                kill(proc)
                await proc.wait()
            if kubelet.scheduler:
                result["scheduler_left"] = kill(kubelet.scheduler)
                await kubelet.scheduler.wait()
            result["workers"] = kubelet.ended
            result["left_running"] = sorted(kubelet.pods)
            result["operator_log"] = open(os.path.join(out_dir, "operator.log"), errors="replace").read()
            status, cr = await kubelet.req("GET", f"/apis/brisk.dev/v1alpha1/namespaces/{NS}/briskclusters/demo")
            result["cluster_left"] = status != 404
            status, bad = await kubelet.req("GET", f"/apis/brisk.dev/v1alpha1/namespaces/{NS}/briskclusters/bad")
            result["bad_status"] = (bad or {}).get("status")
    print(json.dumps(result))


asyncio.run(main())
