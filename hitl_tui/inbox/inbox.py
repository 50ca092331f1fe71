"""The live set of open blocks across every repository, updated one file at a time.

A full scan happens once at start (reporting its blocks in batches as it goes, `on_batch`, so
that the app lists them as they come). After that, each file event re-reads only the file it names
(or, for a layout change such as a new task folder, only that repository's source), and the
result is a Delta the UI applies without rebuilding its list.
"""

from __future__ import annotations

import functools
import operator
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from hitl_tui.inbox import scan as pool
from hitl_tui.inbox.delta import Delta as Delta  # (where the watcher and the app take it)
from hitl_tui.inbox.dirindex import DirIndex
from hitl_tui.inbox.parsecache import ParseCache, gc_paused, with_since
from hitl_tui.inbox.scan import Batches, OnBatch
from hitl_tui.inbox.view import Key, ordered
from hitl_tui.inbox.view import key_of as key_of  # the inbox's key, as its callers name it
from hitl_tui.inbox.workspace import Workspace
from hitl_tui.model import Block, HitlError, StaleError, UsageError
from hitl_tui.sources.base import Source
from hitl_tui.sources.registry import default_sources
from hitl_tui.state.since import SinceBook, key_for
from hitl_tui.textio import printable

if TYPE_CHECKING:
    from hitl_tui.loops.records import Waiting
    from hitl_tui.loops.resume import ResumeBook

P = ParamSpec("P")
_REPO = operator.attrgetter("repo")
R = TypeVar("R")

#: Seconds a file's mtime or ctime is taken back when compared with the clock (a file system's
#: time granularity, a network file system's clock a little behind, an event read late).
SLACK = 2.0


def _locked(
    method: Callable[Concatenate[Inbox, P], R],
) -> Callable[Concatenate[Inbox, P], R]:
    """Run an Inbox method under its lock: the watcher, an answer and the GitHub poller update
    the inbox from different threads."""

    @functools.wraps(method)
    def wrapper(self: Inbox, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.lock:
            return method(self, *args, **kwargs)

    return wrapper


class Inbox:
    """Every open block under a Workspace, keyed by (source, file)."""

    def __init__(
        self,
        workspace: Workspace,
        sources: list[Source] | None = None,
        cache: ParseCache | None = None,
        since: SinceBook | None = None,
    ) -> None:
        self.workspace = workspace
        #: When each block was first seen (`sincebook`); None: a file's mtime stands in.
        self.book = since
        #: Parsed blocks kept between runs (`parsecache`); None parses every file.
        self.cache = cache
        self.sources: list[Source] = sources if sources is not None else default_sources()
        #: Worker processes can rebuild default sources, not ones a caller passed in.
        self._default_sources = sources is None
        self.lock = threading.RLock()
        #: When the last full scan began (the watcher's catch-up compares mtimes with it).
        self.scanned_at = 0.0
        self.blocks: dict[Key, Block] = {}
        self.labels: dict[Path, str] = {}
        self._by_repo: dict[Path | str, set[Key]] = {}
        #: Watched folder -> its repository; built when first needed (a CLI run never does).
        self._dirs: DirIndex | None = None
        #: The remote backends (GitHub, ...; see `use_remotes`): their blocks come in through
        #: `replace_remote`, and answering finds their planner here like the local ones'.
        self.remotes: list[Source] = []
        #: Blocks of remote sources (GitHub), by (source, scope); kept across local rescans.
        self._remote: dict[tuple[str, str], set[Key]] = {}
        #: When this inbox first had each remote block (its `since` is never later).
        self._remote_seen: dict[Key, datetime] = {}
        #: What a source could not read in a repository's configuration (a project.md it
        #: cannot parse, ...), by (repo, source name): warnings, never blocks.
        self._warnings: dict[tuple[Path, str], tuple[str, ...]] = {}
        #: What the config says that will not work here (a `[[loop]]` restart's program not
        #: found: `loops.restart_warnings`), listed first among the warnings.
        self.config_warnings: list[str] = []
        #: What the watcher says of the folders the kernel would not watch (its limit on inotify
        #: watches reached: `watch.WatchLimit`), listed with the warnings; None: every one is.
        self.watch_warning: str | None = None
        #: The repositories those folders belong to: polled, not watched (the header says so).
        self.polled: frozenset[Path] = frozenset()
        #: The answers watched until their loop resumes (`resume.ResumeBook`; None: not
        #: watched), and the `[[loop]]`s whose resume_within they wait (`use_resumes`).
        self.resumes: ResumeBook | None = None
        self.loops: tuple[Any, ...] = ()
        #: `deferred`: the search, the parse cache and the first-seen book wait for `prepare`.
        self._pending = False

    @classmethod
    def open(
        cls, paths: list[Path], sources: list[Source] | None = None, cached: bool = False
    ) -> Inbox:
        """The inbox of `paths`, scanned; `cached` uses and updates the operator's parse cache."""
        workspace = Workspace.discover(paths)
        cache = ParseCache.for_workspace(workspace.paths) if cached else None
        inbox = cls(workspace, sources, cache, SinceBook.for_state() if cached else None)
        inbox.scan()
        inbox.save_cache()
        return inbox

    @classmethod
    def cached(cls, workspace: Workspace) -> Inbox:
        """An inbox using the operator's parse cache for this workspace (the CLI's and app's)."""
        return cls(
            workspace, cache=ParseCache.for_workspace(workspace.paths), since=SinceBook.for_state()
        )

    @classmethod
    def deferred(cls, paths: list[Path]) -> Inbox:
        """The app's inbox of `paths` (checked now), nothing read: `prepare` (or the first
        `scan`) searches and loads what `cached` does; the first frame never waits for it."""
        inbox = cls(Workspace.unsearched(paths))
        inbox._pending = True
        return inbox

    @_locked
    def prepare(self) -> None:
        """What `deferred` left for later, done once (nothing for any other inbox)."""
        if self._pending:
            self.workspace.rescan()
            self.labels = dict(self.workspace.ids)
            self.cache = ParseCache.for_workspace(self.workspace.paths)
            self.book = SinceBook.for_state()
            self._pending = False

    def use_remotes(self, remotes: Iterable[Source]) -> None:
        """The remote backends of the config (`Config.remotes`), whose blocks this inbox lists."""
        self.remotes = list(remotes)
        if self.resumes is not None:
            self.resumes.sources = [*self.sources, *self.remotes]

    def use_resumes(self, book: ResumeBook | None, loops: Iterable[Any] = ()) -> None:
        """Watch answers for their loops to resume in `book` (a `resume.ResumeBook`): its
        folders join `watch_dirs`, `handle` reports what changed in `Delta.waiting`, and
        `answering.apply_answer` notes each answer, for the `resume_within` of `loops`."""
        self.resumes = book
        self.loops = tuple(loops)
        if book is not None:
            book.sources = [*self.sources, *self.remotes]

    def source_named(self, name: str) -> Source | None:
        """The source (local or remote) whose blocks carry `name` as their `Block.source`."""
        return next((s for s in [*self.sources, *self.remotes] if s.name == name), None)

    def save_cache(self) -> None:
        if self.cache is not None:
            self.cache.save()
        if self.book is not None:
            self.book.save()

    # -- reading -----------------------------------------------------------------------------

    @_locked
    def scan(self, workers: int = 1, on_batch: OnBatch | None = None) -> None:
        """Read every repository from scratch.

        With `workers` > 1 (the app asks for one per core) a large workspace is read by worker
        processes, so that parsing does not hold the interpreter lock the UI thread needs while
        it draws. A command-line run reads in-process: measured on 2 cores at 1,000 repos, the
        workers' start-up and unpickling cost more than they save there.

        `on_batch(blocks, repos_read, repos)` is called as the scan goes (from the thread that
        scans, with the inbox locked): each block found once, as it is in `blocks` at the end
        unless the scan met it again; the last call has `repos_read == repos`. The app lists
        the blocks as they come.
        """
        with gc_paused():  # see parsecache.gc_paused
            self.prepare()
            self._scan(workers, Batches(on_batch, len(self.workspace.repos)))

    def _scan(self, workers: int, batches: Batches | None = None) -> None:
        batches = batches or Batches(None, 0)
        self.scanned_at = time.time()
        remote = {k for keys in self._remote.values() for k in keys}
        for key in [k for k in self.blocks if k not in remote]:
            del self.blocks[key]
        self._by_repo.clear()
        self._warnings.clear()
        self.labels = dict(self.workspace.ids)
        repos = self.workspace.repos
        cache = self.cache
        # A warm cache makes the scan mostly stats: workers would cost more than they save.
        parallel = (
            self._default_sources
            and workers > 1
            and len(repos) >= pool.PARALLEL_MIN_REPOS
            and (cache is None or cache.cold)
        )
        if cache is not None:
            cache.begin_scan()
        try:
            if not (parallel and self._scan_in_processes(repos, workers, batches)):
                # In-process (or the workers could not run: what they found stays, and is
                # met again here, so never reported twice). A shard's repositories after
                # another's: its fields are let go before the next is read (`parsecache`).
                if cache is not None:
                    repos = sorted(repos, key=cache.shard_of)
                for done, repo in enumerate(repos, 1):
                    delta = Delta()
                    for source in self.sources:
                        self._scan_source(repo, source, delta)
                    batches.add(delta.added, done)
        finally:
            if cache is not None:
                cache.end_scan()
        if self.book is not None:
            seen = {key_for(*k) for k in self.blocks if k not in remote}
            self.book.prune({os.fsdecode(r) for r in repos}, seen)
        self._dirs = None
        batches.flush(len(repos))

    def _scan_in_processes(self, repos: list[Path], workers: int, batches: Batches) -> bool:
        """Read `repos` in `workers` worker processes, their blocks reported as each worker
        sends them; False if the workers could not run (or failed: the caller reads in-process)."""
        entries: list[Any] = []

        def found(blocks: list[Block], done: int) -> None:
            dated = []
            for block in blocks:
                key = key_of(block)
                if key in self.blocks:
                    continue
                self.blocks[key] = block = self._dated(block)
                self._by_repo.setdefault(block.repo, set()).add(key)
                dated.append(block)
            batches.add(dated, done)

        # The workers take all but the first few repositories, which are read here while
        # they start: the first rows are drawn without waiting for an interpreter to start.
        head, rest = repos[: pool.HEAD_REPOS], repos[pool.HEAD_REPOS :]

        def first() -> None:
            delta = Delta()
            for repo in head:
                for source in self.sources:
                    self._scan_source(repo, source, delta)
            batches.add(delta.added, len(head))
            batches.flush(len(head))

        def counted(blocks: list[Block], done: int) -> None:
            found(blocks, len(head) + done)

        if not pool.run_workers(rest, self.labels, workers, counted, entries, first):
            return False
        if self.cache is not None:
            self.cache.adopt(entries, self.blocks)
        for repo in repos:  # the workers read the layouts; their warnings are here
            for source in self.sources:
                self._note_warnings(repo, source)
        return True

    def _dated(self, block: Block) -> Block:
        """`block` with `since` by its source's rule (`Source.began`; a parse, cached or not,
        gives the file's mtime). A file dated in the future (a clock ahead: NFS, a VM; or just
        wrong) counts from now, when hitl first sees it: never later, or it would never age."""
        first = min(block.since, datetime.now(UTC))
        if self.book is not None:
            first = self.book.first_seen(key_for(block.source, block.path), block.repo, first)
        since = first
        for source in self.sources:  # a loop, not next(): once per block at every start
            if source.name == block.source:
                since = source.began(block, first)
                break
        return block if since == block.since else with_since(block, since)

    def _scan_source(self, repo: Path, source: Source, delta: Delta) -> None:
        seen: set[Key] = set()
        for path in source.block_files(repo):
            self._refresh(repo, source, path, delta)
            seen.add((source.name, path))
        for key in [k for k in self._by_repo.get(repo, ()) if k[0] == source.name]:
            if key not in seen:
                self._drop(repo, key, delta)
        self._note_warnings(repo, source)

    def _note_warnings(self, repo: Path, source: Source) -> None:
        found = tuple(source.warnings(repo))
        if found:
            self._warnings[(repo, source.name)] = found
        else:
            self._warnings.pop((repo, source.name), None)

    @property
    def warnings(self) -> list[str]:
        """Each configuration problem once: the config's (`config_warnings`), then each
        repository's, `label: what is wrong; which folder is read`."""
        # Without the lock (copies, each made at once): the app's header asks at every
        # change, and a catch-up that searches 10,000 repositories again holds the lock for
        # a third of a second.
        watch = [self.watch_warning] if self.watch_warning else []
        found = sorted(list(self._warnings.items()))
        return [*watch, *self.config_warnings] + [
            f"{self.labels.get(repo, repo.name)}: {message}"
            for (repo, _), messages in found
            for message in messages
        ]

    def _refresh(self, repo: Path, source: Source, path: Path, delta: Delta) -> None:
        key = (source.name, path)
        label = self.labels.get(repo) or self.workspace.id_of(repo)
        try:
            if self.cache is None:
                block = source.parse(repo, path, label)
            else:
                block = self.cache.parse(source, repo, path, label)
        except HitlError:
            block = None
        old = self.blocks.get(key)
        if block is None:
            if old is not None:
                self._drop(repo, key, delta)
            elif self.book is not None:
                self.book.forget(key_for(*key))
            return
        self.blocks[key] = block = self._dated(block)
        self._by_repo.setdefault(repo, set()).add(key)
        if old is None:
            delta.added.append(block)
        elif old.fingerprint != block.fingerprint or old.since != block.since:
            delta.changed.append(block)

    def _drop(self, repo: Path, key: Key, delta: Delta) -> None:
        if self.blocks.pop(key, None) is not None:
            delta.removed.append(key)
        if self.book is not None:
            self.book.forget(key_for(*key))
        self._by_repo.get(repo, set()).discard(key)

    def _owners(self) -> dict[Path, Path]:
        if self._dirs is None:
            self._dirs = DirIndex(self.workspace.repos, self.sources)
        return self._dirs.owner

    def _index_dirs(self, changed: Iterable[Path] | None = None) -> set[Path] | None:
        """The folder index built again; with `changed`, those repositories' folders alone.
        Returns the folders whose watch may have changed (None: any)."""
        if changed is None or self._dirs is None:
            self._dirs = DirIndex(self.workspace.repos, self.sources)
            return None
        return self._dirs.update(changed, self.workspace.repos, self.sources)

    @_locked
    def watch_dirs(self, checked: bool = True) -> list[Path]:
        """Every folder to watch, non-recursively: the roots, and each source's folders
        (`checked=False`: not each looked at to be a folder; the watcher stats each anyway)."""
        dirs = dict.fromkeys(self.workspace.roots)
        dirs.update(dict.fromkeys(self._owners()))
        if self.resumes is not None:
            dirs.update(dict.fromkeys(self.resumes.watch_dirs(self.workspace.repos)))
        return [d for d in dirs if os.path.isdir(d)] if checked else list(dirs)

    @_locked
    def sorted_blocks(self) -> list[Block]:
        """In row order (`view.py`: oldest first), as `hitl list` prints them."""
        return ordered(self.blocks.values())

    def repo_count(self) -> int:
        """How many repositories have a block (the header asks at every change)."""
        by_repo = list(self._by_repo.values())
        # Local blocks alone, each listed under its repository: the repositories with a key
        # (in C; a set of 50,000 blocks' repositories was 5-10 ms at each change).
        if not any(self._remote.values()) and sum(map(len, by_repo)) == len(self.blocks):
            return sum(map(bool, by_repo))
        return len(set(map(_REPO, list(self.blocks.values()))))

    # -- live updates ------------------------------------------------------------------------

    @_locked
    def handle(self, paths: Iterable[Path | str]) -> Delta:
        """Apply a batch of changed paths (from the watcher) and say what changed."""
        delta = Delta()
        touched: set[Path] = set()
        relaid: set[Path] = set()
        roots = set(self.workspace.roots)
        owners = self._owners()
        paths = list(paths)
        for path in paths:
            if not isinstance(path, Path):
                continue  # a remote block's URL: its source's poller refreshes it
            if path.parent in roots or path in roots:
                touched.add(path)
            repo = owners.get(path.parent) or owners.get(path)
            if repo is None:
                continue
            if path == repo and not os.path.isdir(repo):
                touched.add(path)
                continue
            for source in self.sources:
                if source.layout_changed(repo, path):
                    self._scan_source(repo, source, delta)
                    relaid.add(repo)
                    delta.rewatch = True
                elif source.claims(repo, path):
                    if path in source.watch_dirs(repo):
                        # An event on a watched folder itself, not on one of its files: re-read
                        # the source there (keying the block by the folder would list it twice).
                        self._scan_source(repo, source, delta)
                    else:
                        self._refresh(repo, source, path, delta)
        found = self._rediscover(touched, delta) if touched else set()
        if delta.rewatch:
            # A repository's own folders changed (its first ask, a new task folder), or it is
            # new or gone: its folders alone are indexed again (all, at 10,000 repos: 0.5 s).
            delta.folders = self._index_dirs(None if found is None else relaid | found)
        if self.resumes is not None:
            delta.waiting = self._resumed(paths, delta.added)
        return delta

    def owners(self, folders: Iterable[Path]) -> set[Path]:
        """The repositories `folders` (watched folders) belong to."""
        with self.lock:
            owner = self._owners()
            return {owner[f] for f in folders if f in owner}

    def catch_up(self, since: float, only: Collection[Path] | None = None) -> Delta:
        """What no file event may have said, read from the files: call it once the watch is
        live (every watch in place), with `since` the wall time from which events may be
        missing (the scan's start, or the previous catch-up's).

        - Repositories and roots that appeared or left under the PATHs: the workspace is
          probed (outside the lock) and, if it moved, rescanned; new repositories are read
          whole. (A repository made before the watch was in place has no event at all.)
        - In the others, each file a source may read a block from whose mtime or ctime is at
          or after `since` (a rename into place keeps the mtime, not the ctime), and each
          listed block whose file is gone, read again.
        - A repository whose folders or layout files changed since then has its watched
          folders listed again: if they moved (a new task folder), its sources are read again
          and the watch restarts (`Delta.rewatch`).

        What changed before `since` was read by the scan or an earlier catch-up, and what
        changes after this one's stats has its event in the live watch: so nothing is missed,
        whatever the moment it was made. Stats only, outside the lock; only what they find is
        read, under it.

        `only`: these repositories alone, and the workspace not probed (the watcher's poll of
        the folders the kernel would not watch: a few stats per repository).
        """
        delta = Delta()
        with self.lock:
            before = set(self.workspace.repos)
            if only is not None:
                before &= set(only)
        if only is None and self.workspace.moved(SLACK):
            with self.lock:
                found = self._rediscover(set(), delta)
                if delta.rewatch:
                    self._index_dirs(found)
        with self.lock:
            repos = [r for r in self.workspace.repos if r in before]
            self._owners()
            assert self._dirs is not None
            # (`only`: their folders alone, not a list for each of 10,000 repositories)
            folders = self._dirs.owned(None if only is None else before)
            listed = (
                self.blocks.items()
                if only is None
                else [
                    (k, self.blocks[k])
                    for r in before
                    for k in self._by_repo.get(r, ())
                    if k in self.blocks
                ]
            )
            gone = [
                (block.repo, key)
                for key, block in listed
                if isinstance(key[1], Path) and block.repo in before
            ]
        changed: list[tuple[Path, Source, Path]] = []
        relaid: list[Path] = []
        layouts: set[Path] = set()
        for repo in repos:
            for source in self.sources:
                changed += [(repo, source, p) for p in source.block_files(repo) if _since(p, since)]
            # A layout file changed, or another folder is there now: read whole, as a new one.
            layout = (p for s in self.sources for p in s.layout_files(repo))
            if _swapped(repo, since) or any(_since(p, since) for p in layout):
                layouts.add(repo)
            # (A watched folder that is gone counts as changed.)
            if repo in layouts or any(_since(d, since, True) for d in folders.get(repo, ())):
                relaid.append(repo)
        gone = [(repo, key) for repo, key in gone if not os.path.lexists(key[1])]
        if changed or relaid or gone:
            with self.lock:
                current = set(self.workspace.repos)
                for repo, source, path in changed:
                    if repo in current:
                        self._refresh(repo, source, path, delta)
                for repo, key in gone:
                    if key in self.blocks:
                        self._drop(repo, key, delta)
                watched = self._owners()
                relayout = False
                for repo in relaid:
                    if repo not in current:
                        continue
                    dirs = {d for s in self.sources for d in s.watch_dirs(repo)}
                    # A folder to watch that is not, or one watched for it that is no more.
                    moved = any(d not in watched for d in dirs) or set(folders.get(repo, ())) - dirs
                    if moved or repo in layouts:
                        for source in self.sources:
                            self._scan_source(repo, source, delta)
                    if moved:
                        relayout = delta.rewatch = True
                if relayout:
                    self._index_dirs(relaid)
        return self._waiting_of(delta)

    def _waiting_of(self, delta: Delta) -> Delta:
        """`delta` with the waiting answers its new blocks resolve (a loop that asked again)."""
        if self.resumes is not None and delta.added:
            with self.lock:
                delta.waiting += self._resumed([], delta.added)
        return delta

    def _resumed(self, paths: list[Path | str], added: list[Block]) -> list[Waiting]:
        """The waiting answers these paths show resumed, and those of repositories where a
        new block was parsed (the loop ran, and asked again)."""
        book = self.resumes
        assert book is not None
        try:
            changed = book.observe(paths)
            for block in added:
                repo = os.fsdecode(block.repo) if isinstance(block.repo, Path) else str(block.repo)
                records = book.open_in(repo)
                if not records:
                    continue
                from hitl_tui.loops.records import key_of

                again = [r for r in records if r.key == key_of(block)]
                other = [r for r in records if r.key != key_of(block)]
                changed += book.resolve(again, f"asked again: {block.one_line_question(60)}")
                changed += book.resolve(other, f"a new block in the repository: {block.id}")
        except Exception:  # the operator's view only: never a reason to stop watching
            return []
        latest = {r.id: r for r in changed if self._mine(r)}
        return list(latest.values())

    def open_waiting(self) -> list[Waiting]:
        """The answers of this inbox still waiting for their loop (or not resumed), oldest
        first: what the app lists as rows."""
        if self.resumes is None:
            return []
        try:
            return [r for r in self.resumes.open() if self._mine(r)]
        except Exception:  # the operator's view only
            return []

    def _mine(self, record: Waiting) -> bool:
        """Whether a waiting answer is of this inbox: a repository of its workspace, or a
        remote block (its backend lists it here)."""
        source = self.source_named(record.source)
        if source is not None and source.remote:
            return True
        return any(os.fsdecode(repo) == record.repo for repo in self.workspace.repos)

    @_locked
    def check_waiting(self, remote: bool = False) -> Delta:
        """Every waiting answer looked at now, and their deadlines (`ResumeBook.check`): once
        the watch is live. `remote` also reads remote ones (GitHub: over the network, so the
        watcher does not). For deadlines alone (a timer), `resumes.due()` reads no repo."""
        if self.resumes is None:
            return Delta()
        try:
            return Delta(waiting=[r for r in self.resumes.check(remote=remote) if self._mine(r)])
        except Exception:
            return Delta()

    def save_since(self) -> None:
        """Write the first-seen times learnt since the last save (`sincebook`). Off the path of
        a file event to its row: the watcher calls it after the change is shown (at 5,000
        blocks a save is tens of milliseconds)."""
        if self.book is not None and self.book.dirty:
            self.book.save()

    def _rediscover(self, touched: set[Path], delta: Delta) -> set[Path] | None:
        """The workspace searched again; returns the repositories that came, went or were
        made again in place (their watched folders to index again; None: every one)."""
        before = set(self.workspace.repos)
        roots = set(self.workspace.roots)
        self.workspace.rescan()
        after = set(self.workspace.repos)
        # Restart the watch when the folders to watch changed, or one was re-created in place
        # (its watch died with the old folder); a file changing in a root changes nothing.
        now_roots = set(self.workspace.roots)
        if after != before or now_roots != roots or touched & (after | now_roots):
            delta.rewatch = True
        for repo in before - after:
            for key in list(self._by_repo.get(repo, ())):
                self._drop(repo, key, delta)
            self._by_repo.pop(repo, None)
            for source in self.sources:
                self._warnings.pop((repo, source.name), None)
        if after - before:
            self.labels = dict(self.workspace.ids)  # the ids of the repos known stay as they were
        # New repositories, and ones deleted and re-created in place (same path, new folder).
        for repo in self.workspace.repos:
            if repo not in before or repo in touched:
                for source in self.sources:
                    self._scan_source(repo, source, delta)
        if now_roots != roots or touched & now_roots:  # a root made again: all anew
            return None
        return (before ^ after) | (touched & after)

    @_locked
    def drop(self, block: Block) -> Delta:
        """Forget a remote block just answered, before its source's next poll confirms it."""
        key = key_of(block)
        if self.blocks.pop(key, None) is None:
            return Delta()
        for keys in self._remote.values():
            keys.discard(key)
        return Delta(removed=[key])

    def has_heard(self, source: str) -> bool:
        """Whether the remote `source` has reported its blocks here yet (until it has, they are
        unknown, not gone)."""
        return any(name == source for name, _scope in list(self._remote))

    @_locked
    def replace_remote(self, source: str, scope: str, blocks: list[Block]) -> Delta:
        """Swap in the latest blocks of one remote source (one `[[github]]` entry, say)."""
        delta = Delta()
        old_keys = self._remote.get((source, scope), set())
        new_keys: set[Key] = set()
        now = datetime.now(UTC)
        for block in blocks:
            key = key_of(block)
            new_keys.add(key)
            self._put_remote(key, block, now, delta)
        for key in old_keys - new_keys:
            self._remote_seen.pop(key, None)
            if self.blocks.pop(key, None) is not None:
                delta.removed.append(key)
        self._remote[(source, scope)] = new_keys
        if self.resumes is not None and delta.added:
            delta.waiting = self._resumed([], delta.added)  # an issue blocked again
        return delta

    @_locked
    def patch_remote(
        self, source: str, scope: str, keys: Iterable[Key], blocks: dict[Key, Block]
    ) -> Delta:
        """`replace_remote` for the blocks `keys` alone (what a host's stream changed): each
        is taken from `blocks` (the scope's blocks now), or removed when it is not there. The
        same Delta as a whole swap, without a pass over every block of the scope."""
        delta = Delta()
        listed = self._remote.setdefault((source, scope), set())
        now = datetime.now(UTC)
        for key in keys:
            block = blocks.get(key)
            if block is not None:
                listed.add(key)
                self._put_remote(key, block, now, delta)
            elif key in listed:
                listed.discard(key)
                self._remote_seen.pop(key, None)
                if self.blocks.pop(key, None) is not None:
                    delta.removed.append(key)
        if self.resumes is not None and delta.added:
            delta.waiting = self._resumed([], delta.added)
        return delta

    def _put_remote(self, key: Key, block: Block, now: datetime, delta: Delta) -> None:
        old = self.blocks.get(key)
        # Another machine's clock may be ahead: never later than this inbox first had it.
        first = self._remote_seen.setdefault(key, now)
        if block.since > first:
            block = with_since(block, first)
        self.blocks[key] = block
        if old is None:
            delta.added.append(block)
        elif old.fingerprint != block.fingerprint or old.since != block.since:
            delta.changed.append(block)

    # -- looking blocks up -------------------------------------------------------------------

    def resolve(self, target: str) -> Block:
        """A block by file path, by repository (with exactly one block), or by id."""
        for block in self.blocks.values():
            if block.id == target:
                return block
        # The id as `hitl list` prints it: undecodable bytes as `\xe9`, control characters as
        # symbols; that is what a person copies from the listing.
        shown = [b for b in self.blocks.values() if printable(b.id) == target]
        if len(shown) == 1:
            return shown[0]
        found = suffix_matches(target, self.blocks.values())
        if len(found) == 1:
            return found[0]
        if found:
            ids = ", ".join(sorted(printable(b.id) for b in found))
            raise UsageError(f"{target!r} matches {len(found)} blocks: {ids}; give more of the id")
        path = Path(os.path.abspath(Path(target).expanduser()))
        for block in self.blocks.values():
            if block.path == path:  # a file, or what stands for one (a FIFO, a dangling link)
                return block
        if path.is_file() or (not path.exists() and path.name.endswith(".md")):
            if not os.path.lexists(path):
                raise StaleError(f"{target} does not exist (already answered?)")
            raise UsageError(f"no open block in {target}")
        if path.is_dir():
            found = [b for b in self.blocks.values() if b.repo == path]
            if len(found) == 1:
                return found[0]
            if not found:
                raise UsageError(f"no open block in {target}")
            ids = ", ".join(sorted(b.id for b in found))
            raise UsageError(f"{target} has {len(found)} open blocks; name one: {ids}")
        raise UsageError(f"no open block with id {target!r} (see 'hitl list')")


def _since(path: Path, since: float, missing: bool = False) -> bool:
    """Whether `path` was written, created or renamed at or after `since` (its mtime or its
    ctime: a rename keeps the mtime and sets the ctime); `missing` when it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return missing
    return st.st_mtime >= since or st.st_ctime >= since


def _swapped(repo: Path, since: float) -> bool:
    """Whether `repo`'s own entry may stand for another folder than before `since`: a symlink
    made since, or a folder renamed there since (a rename sets the ctime; so does an entry made
    or removed in it, which a read again finds unchanged, from the parse cache)."""
    try:
        st = os.lstat(repo)
    except OSError:
        return False
    return st.st_ctime >= since


def suffix_matches(target: str, blocks: Iterable[Block]) -> list[Block]:
    """The blocks whose id ends with `target` in whole path components (`svc-one` and
    `team-a/svc-one` for `team-a/svc-one`, never `one`), as stored or as `hitl list` prints it."""
    wanted = target.strip().strip("/")
    if not wanted:
        return []
    tail = "/" + wanted
    return [
        b
        for b in blocks
        if b.id == wanted
        or b.id.endswith(tail)
        or (shown := printable(b.id)) == wanted
        or shown.endswith(tail)
    ]
