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
3. imports the files the merge brought (since the last commit it imported), the
   memories it adds noted as synced from another machine (the store's `synced`
   index, this machine's own: never in a record file);
4. pushes; a push rejected because another machine pushed first goes back to 2.

Git never sees a conflict: a file is written once and never changed (a new
version of a rule is a new file), so a merge of two machines is the union of
their files. The only other change is the deletion of a forgotten memory's file,
which merges cleanly with a copy that was left unchanged, and the forget wins.

git runs as the user, with their config, credentials and SSH agent, with
`GIT_TERMINAL_PROMPT=0` (a sync never waits for a password) and a timeout per
command (at which its whole process group is killed). The commits mented makes
are not signed and run no hooks: they are machine-made, in a clone only mented uses.

What the remote sends is untrusted (anyone who can push chose it), as
docs/security.md ("Sync and import") details: no git run here may launch a
program the clone could choose (`_SAFE_GIT`, `.git/info/attributes`, the clone's
config checked), a remote commit too big is refused before it is checked out
(`_check_incoming`), files are written and read without following a link
(mented/sync_files.py), each record is checked and a bad one skipped and named,
and any failure is kept for `status`. Nothing here touches the user's own
repositories. Local writes are committed to the clone before anything is
fetched, so a remote that is down or a rejected push loses nothing: the next
sync pushes it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
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
from mented.store import StoreError
from mented.sync_fetch import FETCH_GIT, MAX_FETCH_MIB, WATCH_EVERY_S, PackWatch
from mented.sync_files import MAX_RECORD_BYTES, CloneFiles, batches
from mented.untrusted import Refused, shown
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
# What git says when another machine pushed first: fetch, merge and push again. A push
# the server refuses ("[remote rejected] ... (pre-receive hook declined)", an
# authentication failure) says none of these, and is reported at once with git's words.
_PUSHED_FIRST = ("non-fast-forward", "fetch first", "cannot lock ref")
_RECORD_NAME = re.compile(r"(records|forgotten)/([0-9A-Z]{4})/([0-9A-Z]{26})\.json")
_IMPORT_BATCH = 500  # records parsed and imported at a time: memory stays bounded
_WRITE_BATCH = 1000  # records of the store looked up in git's index at a time
# What a remote's tree may hold before anything of it is checked out (see
# `_check_incoming`): a record is one line; 200,000 rules are about 200,000 files.
MAX_INCOMING_FILES = 1_000_000
MAX_INCOMING_BYTES = 2 * 1024**3
_MAX_OTHER_FILE_BYTES = 1024 * 1024  # a README, a licence
# The most a git that talks to the remote may write in one file (a pack): past it the
# kernel stops it (RLIMIT_FSIZE). Far above a store of 200,000 rules (about 60 MB).
MAX_GIT_FILE_BYTES = 1024**3
# Settings that would make git launch a program, off for every git sync runs in its
# clone: a remote (or anyone who wrote to the clone) must not choose a program. The
# user's own ssh, credential helper and askpass (from their global config) still work:
# sync needs them to reach the remote.
_SAFE_GIT = (
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.pager=cat",
    "-c", "core.editor=true",
    "-c", "sequence.editor=true",
    "-c", "diff.external=",
    "-c", "commit.gpgsign=false",
    "-c", "tag.gpgsign=false",
    "-c", "merge.verifySignatures=false",
    "-c", "protocol.ext.allow=never",
    "-c", "core.bigFileThreshold=1m",
    "-c", "core.symlinks=false",
    "-c", "submodule.recurse=false",
    "-c", "fetch.recurseSubmodules=false",
)  # fmt: skip
# `.git/info/attributes` outranks a `.gitattributes` the remote commits: no filter,
# diff or merge driver (each a program the user's config may define) is ever chosen.
_ATTRIBUTES = b"* !filter !diff !merge !ident !working-tree-encoding\n"
# The clone's own config may hold only these (what `git clone` and `sync init` write).
_CLONE_CONFIG = re.compile(
    r"core\.(repositoryformatversion|filemode|bare|logallrefupdates|symlinks|ignorecase"
    r"|precomposeunicode)"
    r"|remote\.origin\.(url|fetch|pushurl)|branch\.[^.]+\.(remote|merge)|user\.(name|email)"
    r"|extensions\.objectformat"
)


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
    skipped_total: int = 0  # how many in all (only the first few are kept)


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

    def __init__(
        self,
        data_dir: Path,
        *,
        timeout_s: float = 60.0,
        git: str = "git",
        max_fetch_bytes: int = MAX_FETCH_MIB * 1024 * 1024,
    ) -> None:
        self.repo = data_dir / "sync"
        self.timeout_s = timeout_s
        # What one clone or fetch may add to the clone's objects (mented/sync_fetch.py).
        self.max_fetch_bytes = max_fetch_bytes
        self._git = git
        self._state_path = data_dir / "sync-state.json"
        self._lock = threading.Lock()
        # The last failure, also when it could not be saved (a full disk): `state` adds it.
        self._unsaved: SyncState | None = None

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
        if self._unsaved is not None:
            return self._unsaved
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
            _refuse_blank(remote)
            current = self.remote()
            if current == remote:
                return
            if current is not None:
                raise SyncError(
                    f"sync is already set up with {current}; to use another remote run "
                    f"`mentectl sync remote {remote}`"
                )
            self._clone(remote).rename(self.repo)
            self._save(SyncState(remote=remote))

    def set_remote(self, remote: str) -> None:
        """Sync with another remote from now on (`mentectl sync remote URL`).

        The new remote is cloned and checked as `init` checks one (empty, or
        mented's), then takes the old clone's place. Nothing of the store changes: the
        next sync writes every record the new remote lacks and pushes them.

        Raises:
            SyncError: sync is not set up, or `remote` is blank, a working repository,
                one that holds other files, or one git cannot clone.
        """
        with self._lock:
            _refuse_blank(remote)
            if not self.configured:
                raise SyncError("sync is not set up: run `mentectl sync init REMOTE` first")
            partial = self._clone(remote)
            old = self.repo.with_name("sync.old")
            shutil.rmtree(old, ignore_errors=True)
            self.repo.rename(old)
            partial.rename(self.repo)
            shutil.rmtree(old, ignore_errors=True)
            self._unsaved = None
            self._save(SyncState(remote=remote))

    def _clone(self, remote: str) -> Path:
        """Clone `remote` into `sync.partial`, checked; its path.

        Raises:
            SyncError: a working repository, one holding other files, a tree too big,
                or git cannot clone it (with git's own words).
        """
        _refuse_working_repository(remote)
        self.repo.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = self.repo.with_name("sync.partial")
        shutil.rmtree(partial, ignore_errors=True)
        try:
            cloned = self._run(
                "clone", "--quiet", "--no-checkout", "--", remote, str(partial),
                cwd=self.repo.parent, network=True, check=False,
                watch=PackWatch(partial, self.max_fetch_bytes),
            )  # fmt: skip
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        if cloned.returncode:
            shutil.rmtree(partial, ignore_errors=True)
            raise SyncError(f"git clone of {remote} failed: {_git_message(cloned.stderr)}")
        try:
            self._check_remote_holds_rules(partial, remote)
            self._harden(partial)
            empty = self._run("rev-parse", "--verify", "-q", "HEAD", cwd=partial, check=False)
            if not empty.returncode:
                self._check_incoming("HEAD", cwd=partial)
                self._run("reset", "--quiet", "--hard", "HEAD", cwd=partial)
            else:
                # An empty remote: the first machine names the branch.
                self._run("symbolic-ref", "HEAD", f"refs/heads/{_BRANCH}", cwd=partial)
            if not self._run("config", "user.email", cwd=partial, check=False).stdout.strip():
                # No identity in the user's git config: commits need one.
                self._run("config", "user.name", "mented", cwd=partial)
                self._run("config", "user.email", f"mented@{socket.gethostname()}", cwd=partial)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        return partial

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
            except (SyncError, StoreError) as exc:
                self._failed(state, str(exc))
                raise
            except Exception as exc:
                # Whatever it was (a bug, a full disk, a remote nobody foresaw), `status`
                # and `doctor` must say that sync is not working.
                log.exception("sync_failed")
                message = f"sync failed: {_describe(exc)}; what was committed locally is kept"
                self._failed(state, message)
                raise SyncError(message) from exc
            state.last_ok = time.time()
            state.last_error = None
            if result.skipped:  # a skipped file stays skipped: kept until the remote changes
                state.skipped = list(dict.fromkeys([*result.skipped, *state.skipped]))
                state.skipped_total += len(result.skipped)
                state.skipped = state.skipped[:_KEPT_SKIPPED]
            self._save(state)
            return result

    def _failed(self, state: SyncState, message: str) -> None:
        """Keep a failure for `status`, in memory too when it cannot be saved."""
        state.last_error = message
        try:
            self._save(state)
        except OSError:
            self._unsaved = state  # a full disk: `status` still shows it

    def _sync(self, store: Store, state: SyncState) -> SyncResult:
        self._harden(self.repo)
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
            if "remote rejected" in push.stderr or not any(
                word in push.stderr for word in _PUSHED_FIRST
            ):
                raise SyncError(
                    f"git push was refused: {_git_message(push.stderr)}; everything is "
                    "committed locally and the next sync pushes it"
                )
            log.info("sync_push_rejected", branch=branch)  # another machine pushed first
        raise SyncError(
            f"the remote kept changing while pushing ({_PUSH_ATTEMPTS} tries); "
            "everything is committed locally and the next sync pushes it"
        )

    def _write_records(self, store: Store) -> int:
        """Write each record of the store that git does not track yet; how many.

        A record counts as in the clone only when git tracks it: a file that is there
        but untracked (a failed sync, ignored by a `.gitignore` the remote sent) is
        written again and added. Nothing is written through a link (`CloneFiles`).

        Raises:
            SyncError: a directory of the clone is a link or not a directory.
        """
        written = 0
        try:
            with CloneFiles(self.repo) as files:
                # Both walks are in id order: git's listing is merged in, never held as a set.
                records, forgets = self._tracked_ids(RECORDS), self._tracked_ids(FORGOTTEN)
                for batch in store.export_records(batch=_WRITE_BATCH):
                    for memory in batch:
                        if records.has(memory.id) or forgets.has(memory.id):
                            continue
                        files.write(record_path(RECORDS, memory.id), memory_line(memory))
                        written += 1
                del records, forgets
                forgets = self._tracked_ids(FORGOTTEN)
                for tombs in store.export_forgotten(batch=_WRITE_BATCH):
                    for tomb in tombs:
                        if forgets.has(tomb.id):
                            continue
                        files.write(record_path(FORGOTTEN, tomb.id), forgotten_line(tomb))
                        files.remove(record_path(RECORDS, tomb.id))
                        written += 1
        except Refused as exc:
            raise SyncError(
                f"the sync clone holds what mented never writes: {exc}. It came from the "
                "remote; nothing was written through it. Remove it from the remote (`git rm` "
                "in a clone of it, then push) or move to another one with "
                "`mentectl sync remote URL`; until then this machine's rules are not pushed"
            ) from None
        return written

    def _tracked_ids(self, kind: str) -> _SortedIds:
        """The ids of the record files of `kind` git tracks, to look up in id order."""
        listed = self._run("ls-files", "-z", "--", kind, literal=True).stdout
        return _SortedIds(listed, kind)

    def _tracked(self, paths: list[str]) -> set[str]:
        """Which of `paths` (relative to the clone) git tracks."""
        if not paths:
            return set()
        done = self._run("ls-files", "-z", "--", *paths, literal=True)
        return set(done.stdout.split("\0")) - {""}

    def _mark(self) -> bool:
        """Write the marker that says whose repository this is, once; whether it was."""
        if self._tracked([MARKER]):
            return False
        with CloneFiles(self.repo) as files:
            files.write(MARKER, marker_line())
        return True

    def _commit(self, message: str) -> None:
        present = [kind for kind in (RECORDS, FORGOTTEN) if (self.repo / kind).is_dir()]
        # --force: a `.gitignore` from the remote does not keep a record out.
        self._run("add", "--all", "--force", "--", MARKER, *present, literal=True)
        self._run("commit", "--quiet", "--no-verify", "-m", message)

    def _fetch(self, branch: str) -> str | None:
        """Fetch the remote branch; its commit, or None when the remote has none yet."""
        tracking = self._run(
            "for-each-ref", "--format=%(objectname) %(refname)", "refs/remotes/origin"
        ).stdout.split()
        try:
            done = self._run(
                "fetch", "--quiet", "--no-tags", "origin", check=False, network=True,
                watch=PackWatch(self.repo, self.max_fetch_bytes),
            )  # fmt: skip
        except _FetchTooBigError:
            # A fetch that finished past the bound moved refs to the pack just removed.
            self._restore_refs(dict(zip(tracking[1::2], tracking[::2], strict=True)))
            raise
        if done.returncode:
            raise SyncError(f"cannot reach the remote: {_git_message(done.stderr)}")
        ref = f"refs/remotes/origin/{branch}"
        found = self._run("rev-parse", "--verify", "-q", ref, check=False)
        return found.stdout.strip() or None

    def _restore_refs(self, before: dict[str, str]) -> None:
        """Put the remote-tracking refs back as they were `before` a fetch."""
        listed = self._run(
            "for-each-ref", "--format=%(refname)", "refs/remotes/origin"
        ).stdout.split()
        for ref in listed:
            if ref not in before:
                self._run("update-ref", "-d", "--no-deref", ref, check=False)
        for ref, commit in before.items():
            self._run("update-ref", "--no-deref", ref, commit, check=False)
        # Their reflogs name the commits just removed (`git fsck` would call the clone
        # broken): a sync clone needs none, they go with what the fetch brought.
        logs = self.repo / ".git" / "logs"
        for ref in {*listed, *before}:
            if ref.startswith("refs/remotes/origin/") and ".." not in ref:
                (logs / ref).unlink(missing_ok=True)

    def _merge(self, remote_head: str) -> None:
        self._check_incoming(remote_head)
        if self._head() is None:  # nothing committed here yet: take the remote's
            self._run("reset", "--quiet", "--hard", remote_head)
            return
        done = self._run(
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
                f"({_git_message(done.stderr or done.stdout)}); the local commits are kept"
            )

    def _import(self, store: Store, state: SyncState, result: SyncResult) -> None:
        """Import the record files that appeared since the last imported commit.

        Each file is untrusted (anyone who can push wrote it): read without following a
        link, bounded in size and nesting, checked against the format, its id against
        its file name and its time against the clock. A bad one is skipped and named
        (`result.skipped`); the others are imported, `_IMPORT_BATCH` at a time.
        """
        head = self._head()
        if head is None or head == state.imported:
            return
        changes = None
        if state.imported is not None:
            changes = self._run(
                "diff", "--name-only", "-z", "--no-renames", "--diff-filter=A",
                state.imported, head, "--", RECORDS, FORGOTTEN, check=False,
            )  # fmt: skip
        if changes is None or changes.returncode:  # none imported yet, or that commit is gone
            changes = self._run("ls-files", "-z", "--", RECORDS, FORGOTTEN)
        listing = [name for name in changes.stdout.split("\0") if name]
        del changes
        with CloneFiles(self.repo) as files:
            for names in batches(listing, _IMPORT_BATCH):
                memories: list[Memory] = []
                forgotten: list[Forgotten] = []
                for name in names:
                    try:
                        record = _read_record(files, name)
                    except FileNotFoundError:
                        continue  # deleted since: a forget, which has its own file
                    except (FormatError, Refused) as exc:
                        result.skipped.append(str(exc))
                        continue
                    except Exception as exc:  # noqa: BLE001 - one bad file never stops a sync
                        result.skipped.append(f"{shown(name)}: cannot read it: {_describe(exc)}")
                        continue
                    if isinstance(record, Forgotten):
                        forgotten.append(record)
                    elif isinstance(record, Memory):
                        memories.append(record)
                # Noted as synced (the store's per-machine index), in the same write.
                summary = store.import_records(memories, forgotten, synced=True)
                result.added += summary.added
                result.forgotten += summary.forgotten
        state.imported = head
        self._save(state)

    def _check_incoming(self, commit: str, *, cwd: Path | None = None) -> None:
        """Refuse a remote tree too big to check out, before any of it is checked out.

        git has no limit of its own on what a fetch inflates (`receive.maxInputSize`
        is the server's): a small pack can hold a blob of gigabytes that compresses to
        kilobytes. `ls-tree -l` reads each blob's size from its object header without
        inflating it, so the sizes are known before a byte reaches the work tree.

        Raises:
            SyncError: naming the file over the limit, or the count or total.
        """
        files = 0
        total = 0
        listing = self._run("ls-tree", "-r", "-l", "-z", "--full-tree", commit, cwd=cwd)
        for entry in listing.stdout.split("\0"):
            about, _, name = entry.partition("\t")
            if not name:
                continue
            parts = about.split()
            size = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 0
            files += 1
            total += size
            limit = MAX_RECORD_BYTES if _RECORD_NAME.fullmatch(name) else _MAX_OTHER_FILE_BYTES
            if size > limit or files > MAX_INCOMING_FILES or total > MAX_INCOMING_BYTES:
                what = (
                    f"{shown(name)} is {size} bytes (the most a file there may be is {limit})"
                    if size > limit
                    else f"it holds more than {MAX_INCOMING_FILES} files or "
                    f"{MAX_INCOMING_BYTES} bytes"
                )
                raise SyncError(
                    f"the remote's commit {commit[:12]} was not checked out: {what}; "
                    "mented never wrote that. Nothing of it reached this machine's work "
                    "tree or store; remove it from the remote, or move to another one with "
                    "`mentectl sync remote URL`"
                )

    def _harden(self, clone: Path) -> None:
        """Make sure the clone can make git launch no program (see `_SAFE_GIT`).

        Raises:
            SyncError: the clone's config sets something mented does not write.
        """
        listed = self._run("config", "--local", "--list", "--name-only", "-z", cwd=clone)
        foreign = [
            key
            for key in listed.stdout.split("\0")
            if key and not _CLONE_CONFIG.fullmatch(key.lower())
        ]
        if foreign:
            config = clone / ".git" / "config"
            raise SyncError(
                f"the sync clone's config ({config}) sets {', '.join(map(shown, foreign[:3]))}, "
                "which mented never writes there (it could launch a program); remove it "
                f"with `git config --file {config} --unset KEY`"
            )
        info = clone / ".git" / "info"
        info.mkdir(exist_ok=True)
        with CloneFiles(clone) as files:
            try:
                current = files.read(".git/info/attributes")
            except (FileNotFoundError, Refused):
                current = b""
            if current != _ATTRIBUTES:
                files.write(".git/info/attributes", _ATTRIBUTES)

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
        literal: bool = False,
        watch: PackWatch | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the user's git in the clone, with a timeout, launching no program of the clone's.

        git runs in a process group of its own: at the timeout the whole group is
        killed (git, and its `git remote-http` or `ssh`), so that nothing is left behind.
        A git that talks to the remote may write no file over `MAX_GIT_FILE_BYTES`; one
        that fetches (`watch`) may add no more than `watch.limit` bytes of packs: past
        it the group is killed and what it added removed (mented/sync_fetch.py).

        Raises:
            SyncError: git is missing, timed out, fetched too much, or (with `check`) failed.
        """
        env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_MERGE_AUTOEDIT="no")
        env.pop("GIT_DIR", None)
        env.pop("GIT_WORK_TREE", None)
        if literal:
            env["GIT_LITERAL_PATHSPECS"] = "1"
        command = [self._git, *_SAFE_GIT, *(FETCH_GIT if watch else ()), *args]
        if network:
            command = [*_FILE_LIMITED, str(MAX_GIT_FILE_BYTES), *command]
        try:
            process = subprocess.Popen(  # noqa: S603 - the user's git, with arguments we build
                command,
                cwd=cwd or self.repo,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="surrogateescape",  # git names are bytes: never a decoding error
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise SyncError(f"sync needs git, and `{self._git}` is not on PATH") from exc
        try:
            stdout, stderr = self._wait(process, args[0], network=network, watch=watch)
        except BaseException:
            _kill_group(process)
            if watch is not None:
                watch.remove_added()
            raise
        if watch is not None and watch.over():  # it finished between two looks
            watch.remove_added()
            raise _FetchTooBigError(watch.refusal(f"git {args[0]} added {watch.added()} bytes"))
        done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
        if check and done.returncode:
            raise SyncError(f"git {args[0]} failed: {_git_message(done.stderr or done.stdout)}")
        return done

    def _wait(
        self,
        process: subprocess.Popen[str],
        verb: str,
        *,
        network: bool,
        watch: PackWatch | None,
    ) -> tuple[str, str]:
        """git's output once it exits; looking at what it fetched every `WATCH_EVERY_S`.

        Raises:
            SyncError: the timeout passed, or (`_FetchTooBigError`) the fetch passed its bound;
                the caller kills the group.
        """
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                return process.communicate(
                    timeout=max(0.0, min(left, WATCH_EVERY_S) if watch else left)
                )
            except subprocess.TimeoutExpired as exc:
                if watch is not None and watch.over():
                    raise _FetchTooBigError(
                        watch.refusal(f"git {verb} was at {watch.added()} bytes")
                    ) from None
                if time.monotonic() < deadline:
                    continue
                what = "the remote did not answer" if network else "git did not finish"
                raise SyncError(
                    f"{what} within {self.timeout_s:g} s (git {verb}); [sync] timeout_s sets it"
                ) from exc


class _FetchTooBigError(SyncError):
    """A clone or fetch stopped (or undone) past `[sync] max_fetch_mib`."""


# Runs git with RLIMIT_FSIZE set (no preexec_fn: unsafe in a threaded daemon).
_FILE_LIMITED = (
    sys.executable,
    "-I",
    "-S",
    "-c",
    "import os, resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))\n"
    "os.execvp(sys.argv[2], sys.argv[2:])",
)
_KEPT_SKIPPED = 20  # skipped files kept for `status`; the count says how many in all
# git's advice after a failed connection, which hides its reason when shown last.
_BOILERPLATE = (
    "please make sure you have the correct access rights",
    "and the repository exists.",
)


class _SortedIds:
    """The ids in a `git ls-files -z` listing, asked for in ascending order (`has`).

    git lists paths sorted, and `records/<first 4 of the id>/<id>.json` sorts as its id
    does: the listing is walked once beside the store's walk, nothing collected.
    A name that is not a well-formed record file's is passed over.
    """

    def __init__(self, listed: str, kind: str) -> None:
        self._names = (
            matched.group(3)
            for entry in re.finditer(r"[^\0]+", listed)
            if (matched := _RECORD_NAME.fullmatch(entry.group())) is not None
            and matched.group(1) == kind
            and matched.group(2) == matched.group(3)[:4]
        )
        self._current = next(self._names, None)

    def has(self, memory_id: str) -> bool:
        """Whether `memory_id` is listed; each call's id no smaller than the last one's."""
        while self._current is not None and self._current < memory_id:
            self._current = next(self._names, None)
        return self._current == memory_id


def _kill_group(process: subprocess.Popen[str]) -> None:
    """Kill git and every helper it started (they share its new session's group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.communicate()


def _git_message(text: str) -> str:
    """What git said, in one line: every line that says something, advice dropped."""
    lines = [shown(line.strip()) for line in text.strip().splitlines() if line.strip()]
    said = [
        line
        for line in lines
        if line.lower() not in _BOILERPLATE and not line.lower().startswith("hint:")
    ]
    message = "; ".join(dict.fromkeys(said)) or "no message"
    return message if len(message) <= 600 else message[:597] + "..."


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror.lower()}" + (f" ({exc.filename})" if exc.filename else "")
    return f"{type(exc).__name__}: {exc}"


def _read_record(files: CloneFiles, name: str) -> Memory | Forgotten | None:
    """One record file of the clone, checked: its name, size, nesting and content.

    Raises:
        FormatError, Refused: naming the file and what is wrong.
        FileNotFoundError: it is not there.
    """
    matched = _RECORD_NAME.fullmatch(name)
    if matched is None:
        raise FormatError(
            f"{shown(name)}: not a record file's name (records/XXXX/<id>.json); not read"
        )
    kind, prefix, memory_id = matched.groups()
    if prefix != memory_id[:4]:
        raise FormatError(f"{shown(name)}: filed under {prefix}, not under {memory_id[:4]}")
    record = parse_line(files.read(name).strip(), name)
    if record is None:
        return None
    if record.id != memory_id:
        raise FormatError(f"{name}: holds the record {record.id}, not {memory_id}")
    if (kind == FORGOTTEN) != isinstance(record, Forgotten):
        raise FormatError(f"{name}: a {'forget' if kind == FORGOTTEN else 'memory'} is expected")
    return record


def _refuse_blank(remote: str) -> None:
    if not remote.strip():
        raise SyncError(
            "the remote is empty: give a git URL or the path of a bare repository, "
            "e.g. `mentectl sync init git@example.com:me/rules.git`"
        )


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
