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
"""
import json, os, resource, statistics, subprocess, sys, tempfile, time, urllib.request

N = int(sys.argv[1]) if len(sys.argv) > 1 else 30
extra = dict(a.split("=", 1) for a in sys.argv[2:])
here = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp()
subprocess.run(["go", "build", "-o", tmp + "/", "./cmd/mock", "./cmd/raw"], cwd=here, check=True)
subprocess.run(["go", "build", "-o", tmp + "/hrns", "./cmd/hrns"], cwd=os.path.dirname(here), check=True)

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
clients = {
    "raw": ([tmp + "/raw", "--base-url", base + "/v1", "--runs", "1"], [tmp + "/raw", "--base-url", base + "/v1", "--runs", "0"]),
    "hrns-run": ([tmp + "/hrns", "run", "--json", "--tools", "read_file", "--no-skills", "--workdir", work, "--system", system, prompt],
                 [tmp + "/hrns", "run", "--help"]),
}
for name, path in extra.items():
    clients[name] = ([path] + clients["hrns-run"][0][1:], [path, "run", "--help"])

def arrivals():
    return json.load(urllib.request.urlopen(base + "/arrivals?from=0"))["total"]

def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

res = {name: {"first": [], "cpu": [], "idle": []} for name in clients}
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
        c0 = child_cpu()
        subprocess.run(["taskset", "-c", "1"] + idle, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        res[name]["idle"].append((child_cpu() - c0) * 1e3)
mock.terminate()

print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {N} processes each, medians; load {open('/proc/loadavg').read().split()[:3]}")
print(f"{'client':16} {'to 1st request':>15} {'x raw':>6} {'startup CPU':>12} {'x raw':>6} {'run CPU':>9} {'x raw':>6}")
m = {k: {f: statistics.median(v[f]) for f in v} for k, v in res.items()}
for name in clients:
    r = m[name]; b = m["raw"]
    print(f"{name:16} {r['first']:12.2f} ms {r['first']/b['first']:6.2f} {r['idle']:9.2f} ms {r['idle']/b['idle']:6.2f} {r['cpu']:6.2f} ms {r['cpu']/b['cpu']:6.2f}")
