"""Reading what twinscope writes as pandas DataFrames: a trace (.tsc, through `twinscope export --format sqlite`), a twin/join run folder (its join.sqlite) or such a database (docs/python.md, docs/sqlite-schema.md)."""

import io
import json
import os
import pathlib
import shutil
import sqlite3
import subprocess
import tempfile

from ._cli import binary

_SQLITE_MAGIC = b"SQLite format 3\x00"
_JOIN_FORMAT = "twinscope-join-sqlite"


class TwinscopeError(Exception):
    """What was opened cannot be read as twinscope output (the message says why and what to do)."""


def pandas_required():
    """The pandas module, or an ImportError that says how to install it."""
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "twinscope: DataFrames need pandas, which is not installed here: pip install twinscope[pandas] "
            "(or pip install pandas). Without pandas, Run.rows(...) returns the same data as dicts."
        ) from None
    return pandas


def open(path, sqlite=None):  # noqa: A001 (twinscope.open, as in the docs)
    """Opens a trace (.tsc), a twin/join run folder, or a database from `twinscope export --format sqlite`.

    A trace is exported to SQLite with the twinscope CLI first: into `sqlite` if given (kept), else
    into a temporary file removed by close(). Returns a Run (also a context manager).
    """
    return Run(path, sqlite=sqlite)


def _is_sqlite(path):
    with io.open(path, "rb") as f:  # io.open: this module's open() is twinscope.open
        return f.read(16) == _SQLITE_MAGIC


class Run:
    """One opened trace or joined run. `kind` is "trace" (one process's trace) or "joined" (a twin/join run)."""

    def __init__(self, path, sqlite=None):
        self.path = os.fspath(path)
        self._tmp = None
        self._con = None
        if not os.path.exists(self.path):
            raise TwinscopeError(
                "%s: no such file or folder; give a trace (.tsc), a twin/join run folder (twinscope twin -o DIR) "
                "or a database written by twinscope export --format sqlite" % self.path
            )
        if os.path.isdir(self.path):
            db = os.path.join(self.path, "join.sqlite")
            if not os.path.isfile(db):
                if all(os.path.isfile(os.path.join(self.path, f)) for f in ("primary.tsc", "shadow.tsc")):
                    db = self._export(self.path, sqlite)
                else:
                    raise TwinscopeError(
                        "%s: not a twin/join run folder (it has neither join.sqlite nor primary.tsc and shadow.tsc); "
                        "open a trace file or the folder given to twinscope twin/join -o" % self.path
                    )
        elif _is_sqlite(self.path):
            db = self.path
        else:
            db = self._export(self.path, sqlite)
        self.database = db
        self._con = sqlite3.connect(pathlib.Path(os.path.abspath(db)).as_uri() + "?mode=ro", uri=True)
        self._con.row_factory = sqlite3.Row
        try:
            self.meta = {k: v for k, v in self._con.execute("SELECT key, value FROM meta")}
        except sqlite3.DatabaseError as e:
            self.close()
            raise TwinscopeError(
                "%s: not a twinscope database (%s); open a trace, a run folder or what twinscope export wrote"
                % (db, e)
            ) from None
        self.kind = "joined" if self.meta.get("format") == _JOIN_FORMAT else "trace"

    # -- life ---------------------------------------------------------------
    def _export(self, source, sqlite):
        if sqlite:
            out = os.fspath(sqlite)
        else:
            self._tmp = tempfile.mkdtemp(prefix="twinscope-")
            out = os.path.join(self._tmp, "export.sqlite")
        cmd = [binary(), "export", source, "--format", "sqlite", "-o", out]
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        except OSError as e:
            raise TwinscopeError("cannot run the twinscope CLI (%s): %s" % (cmd[0], e)) from None
        if r.returncode != 0 or not os.path.isfile(out):
            raise TwinscopeError(
                "twinscope export %s --format sqlite failed (exit %d): %s" % (source, r.returncode, r.stderr.strip())
            )
        return out

    def close(self):
        if self._con is not None:
            self._con.close()
            self._con = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "twinscope.Run(%r, kind=%r, database=%r)" % (self.path, self.kind, self.database)

    # -- generic ------------------------------------------------------------
    def tables(self):
        """Names of the database's tables and views (docs/sqlite-schema.md)."""
        q = "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name"
        return [r[0] for r in self._con.execute(q)]

    def rows(self, query, params=()):
        """Rows of a query (or of a whole table or view, by name) as dicts; needs no pandas."""
        if " " not in query.strip():
            query = 'SELECT * FROM "%s"' % query.strip()
        return [dict(r) for r in self._con.execute(query, params)]

    def sql(self, query, params=()):
        """A query (or a table or view by name) as a DataFrame."""
        pd = pandas_required()
        if " " not in query.strip():
            query = 'SELECT * FROM "%s"' % query.strip()
        return pd.read_sql_query(query, self._con, params=params)

    def _joined_only(self, what):
        if self.kind != "joined":
            raise TwinscopeError(
                "%s: %s exist only for a joined run (the folder of twinscope twin/join, or its join.sqlite); "
                "this is a single trace" % (self.path, what)
            )

    @property
    def header(self):
        """The trace header (a single trace) or {"primary": ..., "shadow": ...} (a joined run), as dicts."""
        if self.kind == "joined":
            return {s: json.loads(self.meta.get(s + "_header") or "{}") for s in ("primary", "shadow")}
        return json.loads(self.meta.get("header") or "{}")

    def _side_trace(self, side):
        self._joined_only("the primary and shadow traces")
        p = self.meta.get(side) or ""
        here = os.path.dirname(os.path.abspath(self.database))
        for cand in (p, os.path.join(here, p), os.path.join(here, side + ".tsc")):
            if cand and os.path.isfile(cand):
                return Run(cand)
        raise TwinscopeError("%s: the %s trace (%s) is not there any more" % (self.path, side, p or side + ".tsc"))

    def primary(self):
        """The primary's trace of a joined run, as a Run of its own (exported on demand)."""
        return self._side_trace("primary")

    def shadow(self):
        """The shadow's trace of a joined run, as a Run of its own (exported on demand)."""
        return self._side_trace("shadow")

    # -- the views people ask for -------------------------------------------
    def kernels(self):
        """Kernel records with names (`kernels_named`); of the primary for a joined run."""
        return self.sql("SELECT * FROM kernels_named")

    def launches(self):
        """Launch records (a trace: `launches_named`); a joined run: the target launches of both sides."""
        return self.sql("SELECT * FROM launches" if self.kind == "joined" else "SELECT * FROM launches_named")

    def nvtx_ranges(self):
        """NVTX ranges with names; for a joined run, the primary's (read from its trace)."""
        if self.kind == "joined":
            with self.primary() as p:
                return p.nvtx_ranges()
        return self.sql("SELECT * FROM nvtx_ranges_named")

    def blocks(self):
        """Block records of the shadow (SM, entry, exit, arrival order); a joined run adds launch ids and relative times."""
        return self.sql("SELECT * FROM blocks")

    def matches(self):
        """One row per shadow launch matched to a primary launch, both sides' columns (`matched_launches`)."""
        self._joined_only("matches")
        return self.sql("SELECT * FROM matched_launches")

    def why_slow(self):
        """The slow launches of each target kernel shape against its median launch, with their verdicts."""
        self._joined_only("why-slow rows")
        return self.sql(
            "SELECT g.kernel, g.grid_x, g.grid_y, g.grid_z, g.block_x, g.block_y, g.block_z, g.launches, "
            "g.median_duration_ns, g.reference_match, w.* FROM why_slow w JOIN why_slow_groups g ON g.id = w.group_id "
            "ORDER BY w.group_id, w.ratio DESC"
        )

    def requests(self):
        """Requests of a serving run (twin --serve): steps, kernel time, target launches (empty otherwise)."""
        self._joined_only("requests")
        return self.sql("SELECT * FROM requests")

    def processes(self):
        """The traced processes: a `processes` table where the database has one, else one row per trace header."""
        if "processes" in self.tables():
            return self.sql("SELECT * FROM processes")
        pd = pandas_required()
        headers = self.header if self.kind == "joined" else {self.meta.get("role") or "trace": self.header}
        rows = []
        for side, h in headers.items():
            cmd = h.get("command_line")
            rows.append(
                {
                    "side": side,
                    "role": h.get("role"),
                    "pid": h.get("pid"),
                    "host": h.get("host"),
                    "command_line": " ".join(cmd) if isinstance(cmd, list) else cmd,
                    "twinscope_version": h.get("twinscope_version"),
                    "format_version": h.get("format_version"),
                }
            )
        return pd.DataFrame(rows)
