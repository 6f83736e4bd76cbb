"""brisk's Jupyter kernel driven by real Jupyter clients from PyPI:

- the official conformance suite, jupyter_kernel_test, with a test class
  for brisk (execute, stdout/stderr, completion, inspection, is_complete,
  history, errors, display data);
- nbclient executing a notebook end to end;
- jupyter_client: interrupt during a long compute (by signal and by
  message), restart, a message with a bad signature, two clients on one
  kernel, the live progress display, and cells whose work panics.

    python kernel_clients.py PATH/TO/brisk

The kernelspec is installed into a temporary prefix (JUPYTER_PATH points
there); nothing outside it is touched.
"""

import os
import subprocess
import sys
import tempfile
import time
import unittest

BRISK = os.path.abspath(sys.argv.pop(1))
PREFIX = tempfile.mkdtemp(prefix="brisk-jupyter-")
subprocess.run([BRISK, "kernel", "install", "--prefix", PREFIX], check=True, capture_output=True)
os.environ["JUPYTER_PATH"] = os.path.join(PREFIX, "share", "jupyter")

import jupyter_kernel_test  # noqa: E402
import nbformat  # noqa: E402
from jupyter_client.manager import start_new_kernel  # noqa: E402
from jupyter_client.session import Session  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

LONG = "delayed(|x| { let i = 0; while true { i += 1; } i }).call(1).compute()"


class BriskConformance(jupyter_kernel_test.KernelTests):
    kernel_name = "brisk"
    language_name = "rhai"
    file_extension = ".rhai"
    code_hello_world = 'print("hello, world")'
    code_stderr = 'debug("to stderr")'
    completion_samples = [
        {"text": "from_seq", "matches": {"from_sequence"}},
        {"text": "gathe", "matches": {"gather"}},
    ]
    complete_code_samples = ["1 + 1", "fn f(a) { a }", "let x = [1, 2];"]
    incomplete_code_samples = ["fn f(a) {", "let x = [1,", "(1 +"]
    invalid_code_samples = ["let x = ;", "let = 3;"]
    code_generate_error = 'throw "boom"'
    code_execute_result = [
        {"code": "6 * 7", "result": "42"},
        {"code": '"a" + "b"', "result": '"ab"'},
    ]
    code_display_data = [
        {"code": "display(#{a: 1})", "mime": "text/html"},
        {"code": "display(1.5)", "mime": "text/plain"},
    ]
    code_history_pattern = "6*"
    supported_history_operations = ("tail", "range", "search")
    code_inspect_sample = "gather"


def run(kc, code, timeout=60):
    """Execute; return the reply content and the iopub messages of the cell."""
    msgs = []
    reply = kc.execute_interactive(code, output_hook=msgs.append, timeout=timeout)
    return reply["content"], msgs


class Clients(unittest.TestCase):
    def setUp(self):
        self.km, self.kc = start_new_kernel(kernel_name="brisk", startup_timeout=60)

    def tearDown(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)
        self.assertFalse(self.km.is_alive(), "the kernel left on shutdown_request")

    def test_values_errors_and_positions(self):
        reply, msgs = run(self.kc, "let a = from_array([1.0, 2.0, 3.0]);\na.sum().compute()")
        self.assertEqual(reply["status"], "ok")
        results = [m for m in msgs if m["msg_type"] == "execute_result"]
        self.assertEqual(results[0]["content"]["data"]["text/plain"], "6.0")
        reply, msgs = run(self.kc, "a.compute()")
        data = [m for m in msgs if m["msg_type"] == "execute_result"][0]["content"]["data"]
        self.assertIn("<table>", data["text/html"])
        self.assertIn("ndarray f64 (3,)", data["text/plain"])
        reply, msgs = run(self.kc, "let b = 1;\nb + undefined_name")
        self.assertEqual(reply["status"], "error")
        err = [m for m in msgs if m["msg_type"] == "error"][0]["content"]
        self.assertEqual(err["ename"], "RuntimeError")
        self.assertIn(":2:5:", err["evalue"])
        self.assertEqual(err["traceback"][1:], ["  b + undefined_name", "      ^"])
        reply, _ = run(self.kc, "b")
        self.assertEqual(reply["status"], "ok", "the session survives an error")

    def test_silent_and_store_history(self):
        before = run(self.kc, "1")[0]["execution_count"]
        msg_id = self.kc.execute("print(5)", silent=True)
        reply = self.kc.get_shell_msg(timeout=30)
        self.assertEqual(reply["parent_header"]["msg_id"], msg_id)
        after = run(self.kc, "2")[0]["execution_count"]
        self.assertEqual(after, before + 1, "a silent cell does not count")
        self.kc.execute("3", store_history=False)
        self.kc.get_shell_msg(timeout=30)
        self.assertEqual(run(self.kc, "4")[0]["execution_count"], after + 1)

    def test_interrupt_by_signal_and_by_message(self):
        for how in ("signal", "message"):
            msg_id = self.kc.execute(LONG)
            time.sleep(1.5)
            t0 = time.time()
            if how == "signal":
                self.km.interrupt_kernel()
            else:
                msg = self.kc.session.msg("interrupt_request", {})
                self.kc.control_channel.send(msg)
                self.assertEqual(self.kc.get_control_msg(timeout=10)["content"]["status"], "ok")
            reply = self.kc.get_shell_msg(timeout=20)
            self.assertEqual(reply["parent_header"]["msg_id"], msg_id)
            self.assertEqual(reply["content"]["status"], "error", how)
            self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt", how)
            self.assertLess(time.time() - t0, 10, how)
            self.assertEqual(run(self.kc, "1 + 1")[0]["status"], "ok", f"usable after the {how} interrupt")

    def test_stop_on_error_aborts_the_queue(self):
        first = self.kc.execute('throw "stop"')
        queued = self.kc.execute("let ran = 1;")
        replies = {}
        for _ in range(2):
            r = self.kc.get_shell_msg(timeout=30)
            replies[r["parent_header"]["msg_id"]] = r["content"]
        self.assertEqual(replies[first]["status"], "error")
        self.assertEqual(replies[queued]["status"], "aborted")
        self.assertEqual(run(self.kc, "ran")[0]["status"], "error", "the aborted cell never ran")
        self.kc.execute('throw "go on"', stop_on_error=False)
        after = self.kc.execute("let ran2 = 1;")
        for _ in range(2):
            r = self.kc.get_shell_msg(timeout=30)
            replies[r["parent_header"]["msg_id"]] = r["content"]
        self.assertEqual(replies[after]["status"], "ok")

    def test_restart(self):
        run(self.kc, "let kept = 5;")
        self.km.restart_kernel(now=False)
        self.kc.wait_for_ready(timeout=60)
        reply, _ = run(self.kc, "kept")
        self.assertEqual(reply["status"], "error", "a restart starts a fresh session")
        self.assertEqual(run(self.kc, "1 + 1")[0]["status"], "ok")

    def test_a_bad_signature_is_dropped(self):
        bad = Session(key=b"not-the-key", username="mallory")
        bad.send(self.kc.shell_channel.socket, "execute_request",
                 {"code": "let hacked = 1;", "silent": False, "store_history": True,
                  "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        time.sleep(1.0)
        self.assertTrue(self.km.is_alive())
        reply, _ = run(self.kc, "hacked")
        self.assertEqual(reply["status"], "error", "the unsigned request never ran")
        self.assertEqual(run(self.kc, "2 + 2")[0]["status"], "ok")

    def test_two_clients_share_one_session(self):
        other = self.km.client()
        # Its own session id: msg_ids are "<session>_<pid>_<count>", and a
        # copy of the manager's session would repeat the first client's.
        other.session = Session(key=self.km.session.key)
        other.start_channels()
        try:
            other.wait_for_ready(timeout=30)
            # PUB/SUB joins late: wait until the new client's iopub hears results.
            for _ in range(20):
                if any(m["msg_type"] == "execute_result" for m in run(other, "0")[1]):
                    break
                time.sleep(0.1)
            run(self.kc, "let common = 41;")
            reply, msgs = run(other, "common + 1")
            self.assertEqual(reply["status"], "ok", (reply, msgs))
            results = [m for m in msgs if m["msg_type"] == "execute_result"]
            self.assertTrue(results, [(m["msg_type"], m["content"]) for m in msgs])
            result = results[0]
            self.assertEqual(result["content"]["data"]["text/plain"], "42")
        finally:
            other.stop_channels()

    def test_progress_updates_in_place(self):
        code = ("let parts = [];\nfor i in 0..40 { parts.push(delayed(|x| { let s = 0; "
                "for j in 0..150000 { s += j; } s + x }).call(i)); }\ncompute(parts)[0].len()")
        reply, msgs = run(self.kc, code, timeout=120)
        self.assertEqual(reply["status"], "ok")
        shown = [m for m in msgs if m["msg_type"] == "display_data"]
        updates = [m for m in msgs if m["msg_type"] == "update_display_data"]
        self.assertEqual(len(shown), 1, [m["msg_type"] for m in msgs])
        display_id = shown[0]["content"]["transient"]["display_id"]
        self.assertIn("<progress", shown[0]["content"]["data"]["text/html"])
        self.assertTrue(updates, "the display was updated")
        self.assertTrue(all(u["content"]["transient"]["display_id"] == display_id for u in updates))
        self.assertRegex(updates[-1]["content"]["data"]["text/plain"], r"^40/40 tasks in [0-9.]+ s$")


class Survival(unittest.TestCase):
    """A cell whose work panics (a bug in brisk, provoked by a function that
    exists only under BRISK_TEST_PANIC) gets an error reply, and the next
    cell runs in the same session; so does a panic inside a task."""

    def setUp(self):
        env = dict(os.environ, BRISK_TEST_PANIC="1")
        env.pop("RUST_BACKTRACE", None)
        self.km, self.kc = start_new_kernel(kernel_name="brisk", startup_timeout=60, env=env)

    def tearDown(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)

    def test_a_panicking_cell_keeps_the_session(self):
        self.assertEqual(run(self.kc, "let kept = 7;")[0]["status"], "ok")
        reply, msgs = run(self.kc, 'brisk_test_panic("boom")')
        self.assertEqual(reply["status"], "error")
        err = [m for m in msgs if m["msg_type"] == "error"][0]["content"]
        self.assertEqual(err["ename"], "InternalError")
        self.assertIn("internal error: boom at ", err["evalue"])
        self.assertTrue(err["evalue"].endswith("(this is a bug in brisk)"), err["evalue"])
        reply, msgs = run(self.kc, "kept + 1")
        self.assertEqual(reply["status"], "ok", "the next cell runs")
        results = [m for m in msgs if m["msg_type"] == "execute_result"]
        self.assertEqual(results[0]["content"]["data"]["text/plain"], "8", "with the session's variables")
        reply, msgs = run(self.kc, 'submit(|x| brisk_test_panic("in a task"), 1).result()')
        self.assertEqual(reply["status"], "error")
        err = [m for m in msgs if m["msg_type"] == "error"][0]["content"]
        self.assertEqual(err["ename"], "TaskError")
        self.assertIn("panicked: in a task", err["evalue"])
        reply, msgs = run(self.kc, "kept * 6")
        self.assertEqual([m["content"]["data"]["text/plain"] for m in msgs if m["msg_type"] == "execute_result"], ["42"])
        self.assertTrue(self.km.is_alive())


class OutOfMemory(unittest.TestCase):
    """Cells that run out of memory get an error reply naming what needed
    how much, and the kernel and its session go on (before, the kernel
    process aborted without a reply)."""

    def setUp(self):
        env = dict(os.environ, BRISK_MEMORY_LIMIT="1GiB")
        self.km, self.kc = start_new_kernel(kernel_name="brisk", startup_timeout=60, env=env)

    def tearDown(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)

    def test_cells_out_of_memory_keep_the_session(self):
        self.assertEqual(run(self.kc, "let kept = 7;")[0]["status"], "ok")
        for cell in [
            'let s = "ab"; loop { s += s; }',
            "random([100000, 100000]).compute()",
            "submit(|x| { let a = [x]; loop { a += a; } }, 1).result()",
        ]:
            reply, msgs = run(self.kc, cell)
            self.assertEqual(reply["status"], "error", cell)
            err = [m for m in msgs if m["msg_type"] == "error"][0]["content"]
            self.assertIn("not enough memory: ", err["evalue"], cell)
            self.assertIn("(memory limit 1.0 GiB;", err["evalue"], cell)
        reply, msgs = run(self.kc, "kept + 1")
        self.assertEqual(reply["status"], "ok", "the next cell runs")
        self.assertEqual([m["content"]["data"]["text/plain"] for m in msgs if m["msg_type"] == "execute_result"], ["8"])
        self.assertTrue(self.km.is_alive())


class Kernelspec(unittest.TestCase):
    def test_jupyter_kernelspec_list_shows_brisk(self):
        exe = os.path.join(os.path.dirname(sys.executable), "jupyter-kernelspec")
        out = subprocess.run([exe, "list", "--json"], capture_output=True, text=True, check=True)
        specs = __import__("json").loads(out.stdout)["kernelspecs"]
        self.assertIn("brisk", specs)
        spec = specs["brisk"]["spec"]
        self.assertEqual((spec["display_name"], spec["language"]), ("brisk (Rhai)", "rhai"))
        self.assertEqual(spec["argv"][0], BRISK)


class Notebook(unittest.TestCase):
    def test_a_notebook_runs_end_to_end(self):
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_code_cell('print("hello");\nlet x = random([100, 100], #{chunks: 50, seed: 1});\nx'),
            nbformat.v4.new_code_cell("x.shape"),
            nbformat.v4.new_code_cell("display(#{n: 1});\nfrom_sequence([1, 2, 3]).map(|v| v * 2).compute()"),
            nbformat.v4.new_code_cell("fn twice(a) {\n  a * 2\n}\ntwice(21)"),
        ]
        NotebookClient(nb, kernel_name="brisk", timeout=60).execute()
        out = [c.outputs for c in nb.cells]
        self.assertEqual(out[0][0]["text"], "hello\n")
        self.assertIn("dask.array<random_sample", out[0][1]["data"]["text/plain"])
        self.assertIn("<table>", out[0][1]["data"]["text/html"])
        self.assertEqual(out[1][0]["data"]["text/plain"], "[100, 100]")
        self.assertEqual(out[2][0]["output_type"], "display_data")
        self.assertEqual(out[2][1]["data"]["text/plain"], "[2, 4, 6]")
        self.assertEqual(out[3][0]["data"]["text/plain"], "42")
        self.assertEqual(nb.metadata.get("language_info", {}).get("name"), "rhai")
        nbformat.validate(nb)


if __name__ == "__main__":
    unittest.main(verbosity=2)
