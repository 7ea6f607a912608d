#!/usr/bin/env bash
# kill -9 trials of `kiln tune` and `kiln sweep` writing to a session store (not run in CI).
# Each trial starts a run on a fresh store, kills it with SIGKILL at a random moment (seeded,
# drawn over the duration of one uninterrupted run measured first),
# checks the store (PRAGMA integrity_check through python3's sqlite3 module) and the records
# file, compares what the run had printed as done with what was kept, resumes the run and
# checks that the resumed run measured nothing twice and finished the budget. Prints one table
# row per trial and exits non-zero if any trial lost a completed record or broke the store.
# Usage: scripts/kill9.sh [--trials N] [--seed S] [--kind tune|sweep|both] [--build DIR]
#        (defaults: 20 trials, seed 1, both kinds alternating, build/; models from DIR/models
#        or $KILN_MODELS_DIR)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
trials=20 seed=1 kind=both build="$root/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --trials) trials=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --kind) kind=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "usage: $0 [--trials N] [--seed S] [--kind tune|sweep|both] [--build DIR]" >&2; exit 2 ;;
  esac
done
models=${KILN_MODELS_DIR:-$build/models}
exec python3 - "$build/app/kiln" "$models" "$trials" "$seed" "$kind" <<'PY'
import json, os, random, re, signal, sqlite3, subprocess, sys, tempfile, time

kiln, models, trials, seed, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
model = os.path.join(models, "ops", "conv_bn_relu.pt")
rng = random.Random(seed)
work = tempfile.mkdtemp(prefix="kiln_kill9_")
env = dict(os.environ, KILN_NUM_THREADS="1")

TUNE_TRIALS = 12  # per task
SWEEP_BATCHES, SWEEP_BACKENDS = [1, 2, 4, 8], ["kiln", "pytorch-eager"]


def tune_cmd(db, records, js=None):
    c = [kiln, "tune", model, "--tuner", "random", "--trials", str(TUNE_TRIALS), "--batch-size", "4", "--threads", "1",
         "--no-compare", "--confirm", "0", "--timeout", "10", "--db", db, "--records", records, "--seed", "3"]
    return c + (["--json", js] if js else [])


def sweep_cmd(db, js=None, resume=False):
    c = [kiln, "sweep", model, "--batches", ",".join(map(str, SWEEP_BATCHES)), "--backends", ",".join(SWEEP_BACKENDS),
         "--repeat", "5", "--budget", "5", "--threads", "1", "--db", db]
    return c + (["--resume"] if resume else []) + (["--json", js] if js else [])


def killed_run(cmd, delay):
    """Starts cmd, SIGKILLs it after `delay` s (if still running); returns (stderr text, was killed)."""
    err = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        p.wait(timeout=delay)
        killed = False
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait()
        killed = True
    err.seek(0)
    return err.read().decode(errors="replace"), killed


def integrity(db):
    if not os.path.exists(db):
        return "no-db"
    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def query(db, sql):
    if not os.path.exists(db):
        return []
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def file_lines(path):
    good = bad = 0
    if os.path.exists(path):
        for line in open(path, encoding="utf-8", errors="replace"):
            if not line.strip():
                continue
            try:
                json.loads(line)
                good += 1
            except ValueError:
                bad += 1
    return good, bad


def tune_trial(i, delay):
    db, rec, js = (os.path.join(work, f"t{i}.{x}") for x in ("db", "jsonl", "json"))
    err, killed = killed_run(tune_cmd(db, rec), delay)
    printed = max([int(m) for m in re.findall(r"(\d+) measured by this run", err)] or [0])
    ok = integrity(db)
    stored = query(db, "SELECT count(*) FROM tuning_records")[0][0] if os.path.exists(db) else 0
    good, torn = file_lines(rec)
    done = subprocess.run(tune_cmd(db, rec, js), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    r = json.load(open(js)) if done.returncode == 0 else {"tasks": []}
    skipped = sum(t["skipped"] for t in r["tasks"])
    measured = sum(t["measured"] for t in r["tasks"])
    planned = TUNE_TRIALS * len(r["tasks"])
    rows = query(db, "SELECT workload_key, config FROM tuning_records")
    keys = [(k, json.loads(c)["knobs"]) for k, c in rows]
    dups = len(keys) - len(set(keys))
    final_ok = done.returncode == 0 and dups == 0 and skipped + measured == planned and skipped >= stored
    in_flight = ("none (finishing)" if printed >= TUNE_TRIALS else f"candidate {printed + 1}") if killed else "none (finished)"
    return dict(kind="tune", killed=killed, in_flight=in_flight, printed=printed, stored=stored, file=good, torn=torn,
                integrity=ok, lost=max(0, printed - stored), resumed=skipped, new=measured, dups=dups, final=final_ok)


def sweep_trial(i, delay):
    db, js = (os.path.join(work, f"s{i}.{x}") for x in ("db", "json"))
    err, killed = killed_run(sweep_cmd(db), delay)
    printed = len(re.findall(r"^  stored ", err, re.M))
    measuring = re.findall(r"^  measuring (.*)$", err, re.M)
    ok = integrity(db)
    stored = query(db, "SELECT count(*) FROM measurements")[0][0] if os.path.exists(db) else 0
    done = subprocess.run(sweep_cmd(db, js, resume=True), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    m = re.search(r"resumed: (\d+) of (\d+)", done.stdout.decode())
    resumed = int(m.group(1)) if m else 0
    total = len(SWEEP_BATCHES) * len(SWEEP_BACKENDS)
    run = query(db, "SELECT run_id FROM sweeps ORDER BY id DESC LIMIT 1")
    points = query(db, f"SELECT backend, batch FROM measurements WHERE run_id = {run[0][0]}") if run else []
    dups = len(points) - len(set(points))
    # A finished sweep is not resumed: --resume then starts a new one.
    final_ok = done.returncode == 0 and dups == 0 and len(points) == total and resumed == (stored if stored < total else 0)
    in_flight = (measuring[-1] if measuring else "startup") if killed and printed < total else "none (finished)"
    return dict(kind="sweep", killed=killed, in_flight=in_flight, printed=printed, stored=stored, file="-", torn="-",
                integrity=ok, lost=max(0, printed - stored), resumed=resumed, new=total - resumed, dups=dups,
                final=final_ok)


kinds = ["tune", "sweep"] if kind == "both" else [kind]
# One unkilled run of each kind first: kill moments are drawn over its duration on this machine now.
duration = {}
for k in kinds:
    start = time.time()
    db = os.path.join(work, f"calibrate-{k}.db")
    cmd = tune_cmd(db, os.path.join(work, "calibrate.jsonl")) if k == "tune" else sweep_cmd(db)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    duration[k] = time.time() - start
print(f"kill -9 trials: {trials}, seed {seed}, model {model}, work dir {work}")
print("uninterrupted runs: " + ", ".join(f"{k} {d:.1f} s" for k, d in duration.items()) +
      "; kills drawn uniformly over 5-100 % of that")
head = ("#", "kind", "kill at", "in flight", "done printed", "kept", "file/torn", "integrity", "lost", "resumed",
        "new on resume", "twice", "resume ok")
fmt = "%3s %-5s %7s  %-26s %12s %5s %9s %9s %4s %7s %14s %4s %9s"
print(fmt % head)
bad = 0
for i in range(trials):
    k = kinds[i % len(kinds)]
    delay = rng.uniform(0.05, 1.0) * duration[k]
    r = (tune_trial if k == "tune" else sweep_trial)(i, delay)
    bad += r["lost"] > 0 or r["integrity"] not in ("ok", "no-db") or not r["final"]
    print(fmt % (i + 1, k, f"{delay:.1f}s", r["in_flight"][:26], r["printed"], r["stored"], f"{r['file']}/{r['torn']}",
                 r["integrity"], r["lost"], r["resumed"], r["new"], r["dups"], "yes" if r["final"] else "NO"),
          flush=True)
print(f"{trials - bad}/{trials} trials kept every completed record, passed integrity_check and resumed cleanly")
sys.exit(1 if bad else 0)
PY
