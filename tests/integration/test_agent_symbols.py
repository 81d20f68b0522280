"""ember --agent --agent.symbolize=server (issue 31): the agent leaves the
frames of binaries with a build id unnamed (mapping + the call
instruction's address) and the server names them at query time.

agentprogs/cpu_mix.c is compiled here with -g and a build id of its own, its
debug file split off (`objcopy --only-keep-debug`) and the binary stripped;
the program spends 3 ms in alpha_work for each 1 ms in beta_work, under
main -> mix_worker. The oracle is that construction, not the agent:
  - Debian's debuginfod serves the debug file: the flame graph of the
    stripped program has alpha_work and beta_work (3:1, by a binomial bound)
    under mix_worker and main;
  - a binary with its full .symtab (which the agent would name itself in the
    default mode) but whose debug file nobody has stays module+0xoffset:
    the agent really left it to the server;
  - no debuginfod: the debug file uploaded through Pyroscope's upload API,
    then (another build) through Parca's over gRPC: names;
  - --agent.symbolize=both: the binary with its .symtab is named by the
    agent, the stripped one by the server;
  - a stripped Go program (agentprogs/gobusy, `-ldflags=-s -w`), its binary
    uploaded: named from its own .gopclntab.
Needs root (CI runs as root) and a kernel with BTF, like test_agent.py.
"""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import debuginfod_util
import h2client
import harness as h
import test_agent as ta
import test_symbols as ts

PARCA = "/parca.debuginfo.v1alpha1.DebuginfoService"
PYRO = "/debuginfo.v1alpha1.DebuginfoService"


class Build:
    """cpu_mix with a fresh build id: the full binary, its debug file, stripped."""

    def __init__(self, out_dir, name):
        self.full = os.path.join(out_dir, name + "_full")
        self.build_id = os.urandom(20).hex()
        subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-ipa-icf", "-pthread",
                        f"-Wl,--build-id=0x{self.build_id}", os.path.join(ta.PROGS, "cpu_mix.c"),
                        "-o", self.full], check=True)
        self.debug_dir = os.path.join(out_dir, name + "_debug")
        os.makedirs(self.debug_dir)
        self.debug = os.path.join(self.debug_dir, name + ".debug")
        subprocess.run(["objcopy", "--only-keep-debug", self.full, self.debug], check=True)
        self.stripped = os.path.join(out_dir, name)
        subprocess.run(["strip", "--strip-all", "-o", self.stripped, self.full], check=True)


@unittest.skipUnless(os.geteuid() == 0, "the eBPF agent needs root")
class AgentServerSymbolsCase(unittest.TestCase):
    symbol_args = ("--symbolizer.debuginfod-urls=none",)
    mode = "server"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ember-agent-sym-")
        cls.setUpFiles()
        cls.srv = h.Ember(args=["--agent", f"--agent.interval={ta.INTERVAL_S}s",
                                f"--agent.sample-rate={ta.RATE_HZ}", f"--agent.symbolize={cls.mode}",
                                "--symbolizer.query-wait=60s", *cls.symbol_args])
        cls.srv.start()

    @classmethod
    def setUpFiles(cls):
        pass

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def profile(self, binary):
        run = ta.Run([binary, "mix", str(2.5 * ta.INTERVAL_S)]).finish()
        ta.wait_two_drains(self.srv, ta.INTERVAL_S)
        return run

    def nodes(self, run):
        return ta.settled_nodes(self.srv, run, f"profile of pid {run.pid}")

    def assertNamedBySplit(self, nodes):
        totals = ta.totals_by_name(nodes)
        alpha, beta = totals.get("alpha_work", 0), totals.get("beta_work", 0)
        self.assertGreater(beta, 0, f"no beta_work in {sorted(totals)[:40]}")
        a_n, b_n = round(alpha / ta.PERIOD_NS), round(beta / ta.PERIOD_NS)
        why = h.split_mismatch(a_n, a_n + b_n, 0.75)
        self.assertIsNone(why, f"alpha/(alpha+beta) samples: {why}")
        for n in nodes:
            if n["name"] in ("alpha_work", "beta_work"):
                self.assertIn("mix_worker", n["path"], n)
                self.assertIn("main", n["path"], n)

    def assertUnnamed(self, nodes, module):
        names = {n["name"] for n in nodes}
        self.assertFalse(names & {"alpha_work", "beta_work", "mix_worker", "main.hotLoop"},
                         sorted(names)[:40])
        frame = re.compile(re.escape(module) + r"\+0x[0-9a-f]+$")
        self.assertTrue([n for n in names if frame.match(n)], sorted(names)[:40])


class DebuginfodTest(AgentServerSymbolsCase):
    @classmethod
    def setUpFiles(cls):
        why = debuginfod_util.available()
        if why:
            raise unittest.SkipTest(why)
        cls.prog = Build(cls.tmp, "cpu_mix_srv")
        cls.dfd = debuginfod_util.Debuginfod(cls.prog.debug_dir)
        cls.dfd.wait_serving(cls.prog.build_id)
        cls.symbol_args = (f"--symbolizer.debuginfod-urls={cls.dfd.url}",)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.dfd.stop()

    def test_stripped_program_named_by_the_server(self):
        self.assertNamedBySplit(self.nodes(self.profile(self.prog.stripped)))
        self.assertTrue(self.srv.alive(), self.srv.log_tail())

    def test_binary_with_symtab_left_to_the_server(self):
        # its own .symtab names everything in the default mode; in server mode the
        # agent must not use it, and no server has its debug file
        other = Build(self.tmp, "cpu_mix_symtab")
        self.assertUnnamed(self.nodes(self.profile(other.full)), "cpu_mix_symtab_full")


class BothModeTest(DebuginfodTest):
    """--agent.symbolize=both: the agent names what has its .symtab, the server
    the stripped rest."""
    mode = "both"

    test_binary_with_symtab_left_to_the_server = None   # server mode only: here the agent names it

    def test_binary_with_symtab_named_here(self):
        other = Build(self.tmp, "cpu_mix_both")       # no server has its debug file
        self.assertNamedBySplit(self.nodes(self.profile(other.full)))


class UploadTest(AgentServerSymbolsCase):
    @classmethod
    def setUpFiles(cls):
        cls.dpb = h.compile_protos("debuginfo/v1alpha1/debuginfo.proto",
                                   "parca/debuginfo/v1alpha1/debuginfo.proto")

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def test_pyroscope_upload_names_frames(self):
        prog = Build(self.tmp, "cpu_mix_pyro")
        run = self.profile(prog.stripped)
        self.assertUnnamed(self.nodes(run), "cpu_mix_pyro")
        r = self.srv.request("POST", f"{PYRO}/Upload/{prog.build_id}", self.read(prog.debug),
                             {"Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 200, r.describe())
        self.assertNamedBySplit(ta.flame_nodes(self.srv.flamegraph(
            ta.CPU, f'{{pid="{run.pid}"}}', run.started_ms - 60_000, h.now_ms() + 60_000)))

    def grpc(self, client, method, msg):
        r = client.request("POST", f"{PARCA}/{method}",
                           [("content-type", "application/grpc"), ("te", "trailers")],
                           ts.grpc_frames(*(m.SerializeToString() for m in msg)))
        self.assertEqual(r.trailers.get("grpc-status", r.header("grpc-status")), "0", r)
        return bytes(r.body[5:])

    def test_parca_upload_names_frames(self):
        prog = Build(self.tmp, "cpu_mix_parca")
        run = self.profile(prog.stripped)
        self.assertUnnamed(self.nodes(run), "cpu_mix_parca")
        body = self.read(prog.debug)
        p = self.dpb["parca.debuginfo.v1alpha1"]
        c = h2client.H2Client(self.srv.port)
        try:
            ins = p.InitiateUploadResponse.FromString(self.grpc(c, "InitiateUpload", [
                p.InitiateUploadRequest(build_id=prog.build_id, size=len(body))])).upload_instructions
            self.grpc(c, "Upload", [
                p.UploadRequest(info=p.UploadInfo(build_id=prog.build_id, upload_id=ins.upload_id)),
                p.UploadRequest(chunk_data=body)])
            self.grpc(c, "MarkUploadFinished", [
                p.MarkUploadFinishedRequest(build_id=prog.build_id, upload_id=ins.upload_id)])
        finally:
            c.close()
        self.assertNamedBySplit(ta.flame_nodes(self.srv.flamegraph(
            ta.CPU, f'{{pid="{run.pid}"}}', run.started_ms - 60_000, h.now_ms() + 60_000)))

    @unittest.skipUnless(shutil.which("go"), "go is not installed")
    def test_stripped_go_program_named_from_its_pclntab(self):
        """agentprogs/gobusy built with -ldflags=-s -w (no symbols, no DWARF; -B gobuildid
        gives the GNU build id an upload is checked against): unnamed until the binary is
        uploaded, then named from its .gopclntab, hotLoop well above coldLoop (10:1 work)."""
        binary = os.path.join(self.tmp, "gobusy_stripped")
        env = dict(os.environ, GOFLAGS="", GO111MODULE="off", GOPATH=os.path.join(self.tmp, "gopath"),
                   GOCACHE=os.path.join(tempfile.gettempdir(), "ember-test-gocache"))
        subprocess.run(["go", "build", "-ldflags=-s -w -B gobuildid", "-o", binary, "main.go"],
                       check=True, env=env, cwd=os.path.join(ta.PROGS, "gobusy"))
        build_id = re.search(r"Build ID: ([0-9a-f]+)", subprocess.run(
            ["readelf", "-n", binary], capture_output=True, text=True, check=True).stdout).group(1)
        run = ta.Run([binary, str(1.5 * ta.INTERVAL_S)]).finish()
        ta.wait_two_drains(self.srv, ta.INTERVAL_S)
        self.assertUnnamed(self.nodes(run), "gobusy_stripped")
        r = self.srv.request("POST", f"{PYRO}/Upload/{build_id}", self.read(binary),
                             {"Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 200, r.describe())
        totals = ta.totals_by_name(ta.flame_nodes(self.srv.flamegraph(
            ta.CPU, f'{{pid="{run.pid}"}}', run.started_ms - 60_000, h.now_ms() + 60_000)))
        for name in ("main.hotLoop", "main.coldLoop", "main.main", "runtime.main"):
            self.assertIn(name, totals, f"{name} missing from {sorted(totals)[:40]}")
        self.assertGreater(totals["main.hotLoop"], 3 * totals["main.coldLoop"])


if __name__ == "__main__":
    unittest.main()
