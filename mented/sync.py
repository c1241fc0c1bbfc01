"""Sync across machines over git: the user's own `git`, in a clone under the data directory.

`mentectl sync init REMOTE` clones REMOTE (any URL the user's git reaches: SSH,
HTTPS, a local path) into `<data dir>/sync`. It refuses a remote that holds
anything but mented's records (the marker file `mented-sync.json`, written by
the first sync, or the layout below), or only what a git host puts in a new
repository: a URL pasted by mistake, a project's code repository, must not fill
up with records. A local repository with a work tree is refused too (someone's
checkout; git refuses to push into its checked-out branch anyway). Each sync then

1. writes every memory the store has and the clone lacks as its own file,
   `records/<first 4 characters of the id>/<id>.json` (one line of the portable
   format, mented/portable.py), and every forget as `forgotten/.../<id>.json`
   (removing the forgotten memory's file), and commits them;
2. fetches, and merges the remote branch;
3. imports the files the merge brought (since the last commit it imported);
4. pushes; a push rejected because another machine pushed first goes back to 2.

Git never sees a conflict: a file is written once and never changed (a new
version of a rule is a new file), so a merge of two machines is the union of
their files. The only other change is the deletion of a forgotten memory's file,
which merges cleanly with a copy that was left unchanged, and the forget wins.

git runs as the user, with their config, credentials and SSH agent, with
`GIT_TERMINAL_PROMPT=0` (a sync never waits for a password) and a timeout per
command. The commits mented makes are not signed and run no hooks: they are
machine-made, in a clone only mented uses. Nothing here touches the user's own
repositories. Local writes are committed to the clone before anything is
fetched, so a remote that is down or a rejected push loses nothing: the next
sync pushes it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from mented.log import log
from mented.memory import Forgotten, Memory
from mented.portable import (
    FormatError,
    check_marker,
    forgotten_line,
    marker_line,
    memory_line,
    parse_line,
)
from mented.words import counted

if TYPE_CHECKING:
    from mented.store import Store

RECORDS = "records"
FORGOTTEN = "forgotten"
_BRANCH = "main"  # the branch the first machine makes in an empty remote
# Says "this repository holds mented's records, in format N": written by the first sync.
MARKER = "mented-sync.json"
# What a git host may put in a new repository; a remote holding only these counts as empty.
_HOST_STARTERS = ("readme", "license", "licence", "copying", ".gitignore", ".gitattributes")
_OWN_REPOSITORY = (
    "Sync keeps rules in a repository of their own: make an empty one (`git init --bare "
    "PATH`, or a new repository on your git host) and run `mentectl sync init` with it."
)
_PUSH_ATTEMPTS = 4
_REJECTED = ("rejected", "non-fast-forward", "fetch first", "failed to update ref")


class SyncError(Exception):
    """A sync could not finish; the message is for the user. Local writes are kept."""


class SyncState(msgspec.Struct, kw_only=True):
    """What the daemon remembers between syncs (`<data dir>/sync-state.json`)."""

    remote: str | None = None  # as given to `init`
    imported: str | None = None  # the last commit whose records are in the store
    last_attempt: float | None = None
    last_ok: float | None = None
    last_error: str | None = None
    skipped: list[str] = []  # files from the remote that could not be read


@dataclass
class SyncResult:
    """What one sync did."""

    written: int = 0  # records and forgets of this machine added to the clone
    added: int = 0  # memories imported from other machines
    forgotten: int = 0  # memories forgotten because another machine forgot them
    pushed: bool = False
    skipped: list[str] = field(default_factory=list)


def record_path(kind: str, memory_id: str) -> str:
    """Where a record lives in the clone, relative to its root."""
    return f"{kind}/{memory_id[:4]}/{memory_id}.json"


class GitSync:
    """The sync clone in one data directory. One sync at a time (a lock)."""

    def __init__(self, data_dir: Path, *, timeout_s: float = 60.0, git: str = "git") -> None:
        self.repo = data_dir / "sync"
        self.timeout_s = timeout_s
        self._git = git
        self._state_path = data_dir / "sync-state.json"
        self._lock = threading.Lock()

    # ------------------------------------------------------------- set-up

    @property
    def configured(self) -> bool:
        return (self.repo / ".git").is_dir()

    def remote(self) -> str | None:
        """The remote URL, or None when sync is not set up."""
        if not self.configured:
            return None
        done = self._run("config", "--get", "remote.origin.url", check=False)
        return done.stdout.strip() or None

    def state(self) -> SyncState:
        try:
            return msgspec.json.decode(self._state_path.read_bytes(), type=SyncState)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return SyncState()

    def init(self, remote: str) -> None:
        """Clone `remote` into the data directory (nothing else is touched).

        Raises:
            SyncError: already set up with another remote, or git cannot clone it.
        """
        with self._lock:
            current = self.remote()
            if current == remote:
                return
            if current is not None:
                raise SyncError(
                    f"sync is already set up with {current}; to use another remote run "
                    f"`git -C {self.repo} remote set-url origin {remote}`"
                )
            _refuse_working_repository(remote)
            self.repo.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            partial = self.repo.with_name("sync.partial")
            shutil.rmtree(partial, ignore_errors=True)
            self._run(
                "clone", "--quiet", "--", remote, str(partial), cwd=self.repo.parent, network=True
            )
            try:
                self._check_remote_holds_rules(partial, remote)
            except SyncError:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            empty = self._run("rev-parse", "--verify", "-q", "HEAD", cwd=partial, check=False)
            if empty.returncode:
                # An empty remote: the first machine names the branch.
                self._run("symbolic-ref", "HEAD", f"refs/heads/{_BRANCH}", cwd=partial)
            if not self._run("config", "user.email", cwd=partial, check=False).stdout.strip():
                # No identity in the user's git config: commits need one.
                self._run("config", "user.name", "mented", cwd=partial)
                self._run("config", "user.email", f"mented@{socket.gethostname()}", cwd=partial)
            partial.rename(self.repo)
            self._save(SyncState(remote=remote))

    def _check_remote_holds_rules(self, clone: Path, remote: str) -> None:
        """Refuse a remote that holds something else than mented's records.

        Empty is fine (the first machine fills it), and so is what a git host puts
        in a new repository (a README, a licence, .gitignore). Anything else means
        the URL names another repository, a project's code most likely, which
        sync must not fill with records.

        Raises:
            SyncError: naming what is there and what to do instead.
        """
        tip = "HEAD"
        if self._run("rev-parse", "--verify", "-q", tip, cwd=clone, check=False).returncode:
            # No default branch: empty, or the remote's HEAD names a branch nobody pushed
            # (a bare repository made with `master`, then filled by mented on `main`).
            listed = self._run(
                "for-each-ref", "--format=%(refname:lstrip=3)", "refs/remotes/origin", cwd=clone
            )
            branches = [name for name in listed.stdout.split() if name != "HEAD"]
            if not branches:
                return  # empty
            if _BRANCH not in branches:
                raise SyncError(
                    f"{remote} has branches ({', '.join(sorted(branches)[:3])}) but no default "
                    f"branch: it is not a repository mented made. {_OWN_REPOSITORY}"
                )
            tip = f"refs/remotes/origin/{_BRANCH}"
        entries = {}  # top-level name -> "blob" or "tree"
        for line in self._run("ls-tree", tip, cwd=clone).stdout.splitlines():
            about, _, name = line.partition("\t")
            entries[name] = about.split()[1]
        if MARKER in entries:
            marker = self._run("show", f"{tip}:{MARKER}", cwd=clone).stdout.encode()
            _check_marker(marker, remote)
            return
        foreign = [name for name, kind in entries.items() if not _ours_or_a_hosts(name, kind)]
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise SyncError(
                f"{remote} already holds files that are not mented's ({shown}); sync would "
                f"add its records beside them. {_OWN_REPOSITORY}"
            )

    # ---------------------------------------------------------------- sync

    def sync(self, store: Store) -> SyncResult:
        """Commit this machine's records, merge the remote's, import them, push.

        Raises:
            SyncError: not set up, the remote is unreachable, a push kept being
                rejected, or git failed; what was committed locally is kept.
        """
        with self._lock:
            if not self.configured:
                raise SyncError("sync is not set up: run `mentectl sync init REMOTE` first")
            state = self.state()
            state.last_attempt = time.time()
            try:
                result = self._sync(store, state)
            except SyncError as exc:
                state.last_error = str(exc)
                self._save(state)
                raise
            state.last_ok = time.time()
            state.last_error = None
            state.skipped = result.skipped
            self._save(state)
            return result

    def _sync(self, store: Store, state: SyncState) -> SyncResult:
        result = SyncResult(written=self._write_records(store))
        marked = self._mark()
        if result.written or marked:
            records = counted(result.written, "record")
            self._commit(f"mented: {records} from {socket.gethostname()}")
        branch = self._run("symbolic-ref", "--short", "HEAD").stdout.strip()
        for _ in range(_PUSH_ATTEMPTS):
            remote_head = self._fetch(branch)
            if remote_head is not None:
                self._merge(remote_head)
                marker = self.repo / MARKER
                if marker.is_file():  # a newer mented may have written the remote
                    _check_marker(marker.read_bytes(), self.remote() or "the remote")
            self._import(store, state, result)
            head = self._head()
            if head is None or head == remote_head:
                return result  # nothing of ours the remote lacks
            push = self._run(
                "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}", check=False, network=True
            )
            if push.returncode == 0:
                result.pushed = True
                return result
            if "currently checked out" in push.stderr:
                raise SyncError(
                    f"the remote is a working repository with {branch} checked out, and git "
                    f"refuses to push into it. {_OWN_REPOSITORY}"
                )
            if not any(word in push.stderr for word in _REJECTED):
                raise SyncError(f"git push failed: {_last_line(push.stderr)}")
            log.info("sync_push_rejected", branch=branch)  # another machine pushed first
        raise SyncError(
            f"the remote kept changing while pushing ({_PUSH_ATTEMPTS} tries); "
            "everything is committed locally and the next sync pushes it"
        )

    def _write_records(self, store: Store) -> int:
        written = 0
        for batch in store.export_records():
            for memory in batch:
                path = self.repo / record_path(RECORDS, memory.id)
                if path.exists() or (self.repo / record_path(FORGOTTEN, memory.id)).exists():
                    continue
                _write_once(path, memory_line(memory))
                written += 1
        for tombs in store.export_forgotten():
            for tomb in tombs:
                path = self.repo / record_path(FORGOTTEN, tomb.id)
                if path.exists():
                    continue
                _write_once(path, forgotten_line(tomb))
                (self.repo / record_path(RECORDS, tomb.id)).unlink(missing_ok=True)
                written += 1
        return written

    def _mark(self) -> bool:
        """Write the marker that says whose repository this is, once; whether it was."""
        marker = self.repo / MARKER
        if marker.exists():
            return False
        _write_once(marker, marker_line())
        return True

    def _commit(self, message: str) -> None:
        present = [kind for kind in (RECORDS, FORGOTTEN) if (self.repo / kind).is_dir()]
        self._run("add", "--all", "--", MARKER, *present)
        self._run("-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify", "-m", message)

    def _fetch(self, branch: str) -> str | None:
        """Fetch the remote branch; its commit, or None when the remote has none yet."""
        done = self._run("fetch", "--quiet", "origin", check=False, network=True)
        if done.returncode:
            raise SyncError(f"cannot reach the remote: {_last_line(done.stderr)}")
        ref = f"refs/remotes/origin/{branch}"
        found = self._run("rev-parse", "--verify", "-q", ref, check=False)
        return found.stdout.strip() or None

    def _merge(self, remote_head: str) -> None:
        if self._head() is None:  # nothing committed here yet: take the remote's
            self._run("reset", "--quiet", "--hard", remote_head)
            return
        done = self._run(
            "-c",
            "commit.gpgsign=false",
            "merge",
            "--quiet",
            "--no-edit",
            "--no-verify",
            "--allow-unrelated-histories",
            "-m",
            f"mented: merge from {socket.gethostname()}",
            remote_head,
            check=False,
        )
        if done.returncode:
            self._run("merge", "--abort", check=False)
            raise SyncError(
                "the sync history diverged and git could not merge it "
                f"({_last_line(done.stderr or done.stdout)}); the local commits are kept"
            )

    def _import(self, store: Store, state: SyncState, result: SyncResult) -> None:
        """Import the record files that appeared since the last imported commit."""
        head = self._head()
        if head is None or head == state.imported:
            return
        changes = None
        if state.imported is not None:
            changes = self._run(
                "diff", "--name-only", "--no-renames", "--diff-filter=A",
                state.imported, head, "--", RECORDS, FORGOTTEN, check=False,
            )  # fmt: skip
        if changes is None or changes.returncode:  # none imported yet, or that commit is gone
            changes = self._run("ls-files", "--", RECORDS, FORGOTTEN)
        listing = changes.stdout.splitlines()
        memories: list[Memory] = []
        forgotten: list[Forgotten] = []
        for name in listing:
            try:
                line = (self.repo / name).read_bytes()
                record = parse_line(line, name)
            except FormatError as exc:
                result.skipped.append(str(exc))
                continue
            except OSError:
                continue  # deleted since: a forget, which has its own file
            if isinstance(record, Forgotten):
                forgotten.append(record)
            elif isinstance(record, Memory):
                memories.append(record)
        summary = store.import_records(memories, forgotten)
        result.added += summary.added
        result.forgotten += summary.forgotten
        state.imported = head
        self._save(state)

    def _head(self) -> str | None:
        done = self._run("rev-parse", "--verify", "-q", "HEAD", check=False)
        return done.stdout.strip() or None

    def _save(self, state: SyncState) -> None:
        _write_once(self._state_path, msgspec.json.encode(state))

    def _run(
        self,
        *args: str,
        cwd: Path | None = None,
        check: bool = True,
        network: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run the user's git in the clone, with a timeout.

        Raises:
            SyncError: git is missing, timed out, or (with `check`) failed.
        """
        env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_MERGE_AUTOEDIT="no")
        try:
            done = subprocess.run(  # noqa: S603 - the user's git, with arguments we build
                [self._git, *args],
                cwd=cwd or self.repo,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError as exc:
            raise SyncError(f"sync needs git, and `{self._git}` is not on PATH") from exc
        except subprocess.TimeoutExpired as exc:
            what = "the remote did not answer" if network else "git did not finish"
            raise SyncError(
                f"{what} within {self.timeout_s:g} s (git {args[0]}); [sync] timeout_s sets it"
            ) from exc
        if check and done.returncode:
            raise SyncError(f"git {args[0]} failed: {_last_line(done.stderr or done.stdout)}")
        return done


def _refuse_working_repository(remote: str) -> None:
    """Refuse a local repository with a work tree: someone's checkout, not a remote.

    Raises:
        SyncError: with the way to make a repository for sync.
    """
    path = Path(remote.removeprefix("file://"))
    if path.is_absolute() and ((path / ".git").exists() or path.name == ".git"):
        raise SyncError(
            f"{remote} is a working repository (it has a checked-out work tree), not one to "
            f"push to. {_OWN_REPOSITORY}"
        )


def _ours_or_a_hosts(name: str, kind: str) -> bool:
    """Whether a top-level entry is mented's layout, or a file a git host starts with."""
    if name in (RECORDS, FORGOTTEN):
        return kind == "tree"
    return kind == "blob" and name.lower().startswith(_HOST_STARTERS)


def _check_marker(data: bytes, remote: str) -> None:
    try:
        check_marker(data, f"{remote}: {MARKER}")
    except FormatError as exc:
        raise SyncError(str(exc)) from None


def _write_once(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    partial.replace(path)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
