#!/usr/bin/env python3
"""startup.py: a client as a process, up to its first request.

Runs each client as a fresh process for one run (the bench's task), N times
in turn, pinned to CPU 1 with the mock on CPU 0 as the driver pins them, and
reports medians of: the time from just before the process is started to the
arrival of its first model request at the mock (the mock's --record-arrivals,
both clocks CLOCK_REALTIME), the CPU (user + system, from the child's rusage)
of the whole one-run process, and the CPU of the same process doing no run
(its startup: flags, environment, package initialisation; hrns: `hrns run
--help`, which parses the command line and returns). The baseline is the raw
client (bench/internal/raw).

    python3 startup.py [N] [NAME=PATH ...]

Each NAME=PATH adds a client: another build of hrns (PATH), run as
`hrns run` is, to measure an experiment against the same baseline in the
same run.

    python3 startup.py [--written | --evicted] [N] [NAME=PATH ...]

How a binary's pages sit in the page cache changes what starting it costs,
the more so the larger the binary: a 40-50 MB hrns takes 740-830 page
faults to start when the linker has just written it (as here, where the
script builds raw and hrns), 770-1,100 when it was written by write(2) (a
download, cp, an install) and 950-1,110 when its pages were read back in
by a process's faults (after the page cache dropped them); the raw
client's stay at 360-410. So compare builds in one state: --written copies every
client's binary (raw, hrns and each PATH) through write(2) before the runs,
--evicted does that and then drops the copies' pages, for the warm-up run
to fault them back in.
"""
import json, os, resource, statistics, subprocess, sys, tempfile, time, urllib.request

args = sys.argv[1:]
state = "fresh"
if args and args[0] in ("--written", "--evicted"):
    state = args.pop(0)[2:]
N = int(args[0]) if args else 30
extra = dict(a.split("=", 1) for a in args[1:])
here = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp()
subprocess.run(["go", "build", "-o", tmp + "/", "./cmd/mock", "./cmd/raw"], cwd=here, check=True)
subprocess.run(["go", "build", "-o", tmp + "/hrns", "./cmd/hrns"], cwd=os.path.dirname(here), check=True)

def place(path, name):
    """The binary to run for a client: path itself, or a copy in the chosen state."""
    if state == "fresh":
        return path
    dst = f"{tmp}/copy-{name}"
    with open(path, "rb") as src, open(dst, "wb") as out:
        while b := src.read(1 << 20):
            out.write(b)
        out.flush(); os.fsync(out.fileno())
    os.chmod(dst, 0o755)
    if state == "evicted":
        fd = os.open(dst, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    return dst

import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
mock = subprocess.Popen(["taskset", "-c", "0", tmp + "/mock", "--addr", f"127.0.0.1:{port}", "--record-arrivals"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
base = f"http://127.0.0.1:{port}"
for _ in range(100):
    try:
        urllib.request.urlopen(base + "/arrivals"); break
    except Exception:
        time.sleep(0.05)

work = tempfile.mkdtemp()
os.makedirs(work + "/notes")
for k in range(1, 6):
    open(f"{work}/notes/turn-{k}.txt", "w").write("x" * 500)
home = tempfile.mkdtemp()
env = {"PATH": os.environ["PATH"], "HOME": home, "TMPDIR": tempfile.gettempdir(), "LANG": "C.UTF-8", "NO_PROXY": "*",
       "OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": base + "/v1", "OPENAI_MODEL": "bench-model"}
system = "You are a careful assistant. Use the read_file tool to read the notes you are asked about."
prompt = "Read the notes and tell me what they say."
raw, hrns = place(tmp + "/raw", "raw"), place(tmp + "/hrns", "hrns")
clients = {
    "raw": ([raw, "--base-url", base + "/v1", "--runs", "1"], [raw, "--base-url", base + "/v1", "--runs", "0"]),
    "hrns-run": ([hrns, "run", "--json", "--tools", "read_file", "--no-skills", "--workdir", work, "--system", system, prompt],
                 [hrns, "run", "--help"]),
}
for name, path in extra.items():
    path = place(path, name)
    clients[name] = ([path] + clients["hrns-run"][0][1:], [path, "run", "--help"])

def arrivals():
    return json.load(urllib.request.urlopen(base + "/arrivals?from=0"))["total"]

def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def child_faults():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt

res = {name: {"first": [], "cpu": [], "idle": [], "faults": []} for name in clients}
for name, (argv, _) in clients.items():  # warm the page cache
    subprocess.run(["taskset", "-c", "1"] + argv, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for i in range(N):
    for name, (argv, idle) in clients.items():
        n0 = arrivals()
        c0 = child_cpu()
        t0 = time.time_ns()
        p = subprocess.run(["taskset", "-c", "1"] + argv, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        c1 = child_cpu()
        if p.returncode != 0:
            sys.exit(f"{name}: {p.stderr.decode()[-500:]}")
        a = json.load(urllib.request.urlopen(f"{base}/arrivals?from={n0}"))["unix_nano"]
        res[name]["first"].append((a[0] - t0) / 1e6)
        res[name]["cpu"].append((c1 - c0) * 1e3)
        c0, f0 = child_cpu(), child_faults()
        subprocess.run(["taskset", "-c", "1"] + idle, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        res[name]["idle"].append((child_cpu() - c0) * 1e3)
        res[name]["faults"].append(child_faults() - f0)
mock.terminate()

print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {N} processes each, medians; binaries {state}; load {open('/proc/loadavg').read().split()[:3]}")
print(f"{'client':16} {'to 1st request':>15} {'x raw':>6} {'startup CPU':>12} {'x raw':>6} {'run CPU':>9} {'x raw':>6} {'startup faults':>15}")
m = {k: {f: statistics.median(v[f]) for f in v} for k, v in res.items()}
for name in clients:
    r = m[name]; b = m["raw"]
    print(f"{name:16} {r['first']:12.2f} ms {r['first']/b['first']:6.2f} {r['idle']:9.2f} ms {r['idle']/b['idle']:6.2f} {r['cpu']:6.2f} ms {r['cpu']/b['cpu']:6.2f} {r['faults']:15.0f}")
