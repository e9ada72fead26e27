"""Grading into a real PostgreSQL gradebook: several workers, and two graders at once.

The fixture starts a throw-away PostgreSQL server from the Debian package (initdb + pg_ctl,
as an unprivileged user: PostgreSQL refuses to run as root), on a loopback port, in a
temporary folder, and stops it afterwards. Two `python -m bertcourse.grade` processes then
grade disjoint shards of the same assignment into it at the same time (as graders on two
machines would), each with two workers; both see every student's status in the end.
"""

from __future__ import annotations

import csv
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from course_fixture import make_toy_course
from hostile.bank import CASES, write_submission

from bertcourse.grade.results import AWAITING_REVIEW, WITHHELD_STATUSES

HERE = Path(__file__).parent
INITDB = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
psycopg2 = pytest.importorskip("psycopg2")
pytestmark = pytest.mark.skipif(not INITDB, reason="PostgreSQL server binaries not installed")
STUDENTS = ["correct", "wrong_answer", "kernel_death", "edited_test", "duplicated_test"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server for this module; yields its SQLAlchemy URL."""
    bindir = os.path.dirname(INITDB[-1])
    base = tempfile.mkdtemp(prefix="bertcourse-pg-")
    user = None
    if os.geteuid() == 0:  # postgres will not run as root: use an unprivileged account
        for name in ("postgres", "nobody"):
            try:
                user = pwd.getpwnam(name)
                break
            except KeyError:
                continue
        os.chmod(base, 0o755)
        os.chown(base, user.pw_uid, user.pw_gid)
    data, port = os.path.join(base, "data"), _free_port()
    as_user = {"user": user.pw_uid, "group": user.pw_gid} if user else {}
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}

    def pg(*args: str) -> None:
        subprocess.run(args, check=True, capture_output=True, env=env, cwd=base, **as_user)

    pg(f"{bindir}/initdb", "-D", data, "-U", "grader", "-A", "trust", "--no-sync", "-E", "UTF8")
    pg(
        f"{bindir}/pg_ctl",
        "-D",
        data,
        "-l",
        os.path.join(base, "log"),
        "-w",
        "-t",
        "60",
        "-o",
        f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60",
        "start",
    )
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=port, user="grader", dbname="postgres")
        conn.autocommit = True
        conn.cursor().execute("CREATE DATABASE gradebook")
        conn.close()
        yield f"postgresql://grader@127.0.0.1:{port}/gradebook"
    finally:
        subprocess.run(
            [f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
            capture_output=True,
            env=env,
            cwd=base,
            **as_user,
        )
        shutil.rmtree(base, ignore_errors=True)


def test_two_graders_with_several_workers_share_one_postgres_gradebook(
    postgres: str, tmp_path: Path
) -> None:
    toy = make_toy_course(tmp_path / "course")
    course, honest = toy.root, toy.honest
    cases = {c.name: c for c in CASES if c.name in STUDENTS}
    for name, case in cases.items():
        write_submission(
            case, honest, {}, str(course / ".grading" / "submitted" / name / "toy"), "toy"
        )
    command = [sys.executable, "-m", "bertcourse.grade", "toy", "--db", postgres, "--quiet"]
    init = subprocess.run(
        [*command, "--course", str(course), "--init-only"], capture_output=True, text=True
    )
    assert init.returncode == 0, init.stderr
    graders = [
        subprocess.Popen(
            [
                *command,
                "--course",
                str(course),
                "--workers",
                "2",
                "--shard",
                f"{k}/2",
                "--csv",
                str(tmp_path / f"shard{k}.csv"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(2)
    ]
    for grader in graders:
        out, err = grader.communicate(timeout=600)
        assert grader.returncode == 0, err[-3000:]
    report = subprocess.run(
        [*command, "--course", str(course), "--report-only", "--csv", str(tmp_path / "all.csv")],
        capture_output=True,
        text=True,
    )
    assert report.returncode == 0, report.stderr
    with open(tmp_path / "all.csv", newline="") as f:
        last = {r["student_id"]: r for r in csv.DictReader(f)}
    assert set(last) == set(cases)
    for name, case in cases.items():
        row = last[name]
        assert row["status"] == case.status, (name, row["detail"])
        if case.status in WITHHELD_STATUSES:  # no points in an export until an instructor decides
            assert row["review"] == AWAITING_REVIEW and row["score"] == "", name
            assert all(row[test] == "" for test in case.expected_parts()), name
            continue
        for test, points in case.expected_parts().items():
            assert float(row[test]) == points, (name, test)
    conn = psycopg2.connect(postgres)
    with conn, conn.cursor() as cur:
        cur.execute("SELECT student_id, status FROM bertcourse_grade_status")
        assert dict(cur.fetchall()) == {n: c.status for n, c in cases.items()}
        cur.execute(
            "SELECT count(*) FROM grade g JOIN submitted_notebook n ON g.notebook_id = n.id"
        )
        assert cur.fetchone()[0] == 3 * len(cases)  # one nbgrader Grade row per test cell
    conn.close()
