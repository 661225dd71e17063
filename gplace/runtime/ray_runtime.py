"""Measure the K placements of a batch on Ray actors: one per worker machine, or one per GPU set.

``ray`` is imported when a :class:`RayRuntime` first measures (``pip install "ray>=2.9"``).

Actors
    With ``resources_per_actor`` (e.g. ``{"GPU": 1}``, or ``{"GPU": 2, "CPU": 8}``) each actor reserves those
    resources (Ray then sets ``CUDA_VISIBLE_DEVICES`` so that the actor's ``cuda:0`` is its own GPU), and
    there are ``num_actors`` of them, by default as many as the cluster's resources hold. Without it, and
    without ``num_actors``, there is one actor (1 CPU and all the node's GPUs, which Ray then sets in its
    ``CUDA_VISIBLE_DEVICES``) pinned to each alive node: one per worker machine. With ``num_actors`` alone, that
    many 1-CPU actors wherever Ray puts them, reserving no GPU (an actor without GPUs gets no
    ``CUDA_VISIBLE_DEVICES`` from Ray 2.60 here, so it sees whatever GPUs its node has, unaccounted).
What travels
    As for :class:`~gplace.runtime.parallel.PoolRuntime`: each actor gets the inner runtime once (a fresh copy
    from its constructor arguments where possible, pickled with Ray's cloudpickle so that a runtime class
    defined in ``__main__`` or inside a function travels by value), a (graph, cluster) pair is put in the object
    store once, and an actor fetches it the first time it meets the pair; each call carries the pair's key and
    one device array. An actor that cannot start (the runtime does not unpickle there) raises
    ``RuntimeError``: a set-up error, not a measurement. Graphs that cannot be pickled (joint training graphs
    from ``from_torch``) are measured in the calling process, with a warning.
Order and failures
    Placement ``i`` goes to actor ``i % num_actors`` (round robin); results come back in the order of the
    placements. An exception from the inner runtime is a failed measurement naming it; any other Ray error (a
    result lost on its way back) is a failed measurement marked ``transient``, as a timeout is. An actor that dies
    fails the calls queued on it; each of those placements is then measured again by itself (dead actors
    replaced), so the one that kills actors gets ``"Ray actor died ..."`` and the others their results.
    With ``timeout``, a call still running that many seconds after its actor took it (the actor's previous
    call returned) is a failed measurement (``"timed out ..."``); the actor is killed and replaced, and the
    calls queued behind it are measured again by themselves. Each actor first reads a graph and warms up on it
    untimed, as a pool's workers do.
Ray itself
    ``address=None`` joins the Ray instance this process already started, or one named by ``RAY_ADDRESS``,
    else starts a local one (``ray.init``); ``"auto"`` or ``"ray://host:10001"`` joins a running cluster. The
    cluster must import gplace and torch (same versions) on every node. :meth:`close` kills the actors, and
    shuts Ray down if a RayRuntime started it and no other open one uses it. Ray shut down and started again
    under a runtime (by its user) voids its actors: it starts new ones in the new session.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import Any

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.errors import check_sizes, error_summary
from gplace.ir.locks import ForkSafeLock
from gplace.runtime.base import Measurement, Runtime
from gplace.runtime.parallel import WARM_UP, ProblemKey, ProblemKeys, Worker, pickle_for_workers, pickled_runtime
from gplace.runtime.wrapper import RuntimeWrapper, check_timeout

logger = logging.getLogger(__name__)

__all__ = ["RayRuntime"]


class _RayWorker(Worker):
    """A worker whose (graph, cluster) pairs come from Ray's object store."""

    def fetch(self, source: Any) -> bytes:
        """``source`` is ``[ObjectRef]`` (wrapped in a list so that Ray does not fetch it for every call)."""
        import ray

        return ray.get(source[0])

    def ready(self) -> bool:
        """Returns once the actor has started."""
        return True


class RayRuntime(RuntimeWrapper):
    """Any picklable runtime, its ``measure_many`` fanned out over Ray actors (see the module docstring).

    Its ``id`` and ``deterministic`` are those of the runtime it wraps.

    Args:
        runtime: the runtime each actor runs.
        address: Ray address to join. (default: None: this process's Ray, ``RAY_ADDRESS``, or a new local one)
        num_actors: number of actors. (default: None: see the module docstring)
        resources_per_actor: resources each actor reserves, e.g. ``{"GPU": 1}``; ``"CPU"`` defaults to 1.
            (default: None)
        threads_per_worker: intra-op thread limit for torch and OpenMP in each actor. (default: None)
        timeout: seconds one placement may run on an actor before it is a failed measurement and the actor is
            replaced; actor start-up, reading a graph and one warm-up measurement of it (done on every actor first,
            bounded by ``timeout`` + :data:`~gplace.runtime.parallel.WARM_UP` seconds) are not counted.
            (default: None: no limit)
    """

    def __init__(
        self, runtime: Runtime, address: str | None = None, num_actors: int | None = None,
        resources_per_actor: Mapping[str, float] | None = None, threads_per_worker: int | None = None,
        timeout: float | None = None,
    ) -> None:
        timeout = check_timeout(timeout)
        if num_actors is not None:
            check_sizes(type(self).__name__, 1, num_actors=num_actors)
        super().__init__(runtime)
        self.address = address
        self.num_actors = num_actors
        self.resources_per_actor = dict(resources_per_actor) if resources_per_actor else None
        self.threads_per_worker = threads_per_worker
        self.timeout = timeout
        self._loaded: list[set[ProblemKey]] = []
        """Per actor slot, the problems its actor read (and warmed up on) ahead of timed measurements."""
        self._cold: set[ProblemKey] = set()
        """Problems whose warm-up failed or ran past :data:`~gplace.runtime.parallel.WARM_UP`: read without one."""
        self._runtime_blob: bytes | None = None
        self._actors: list[Any] = []
        self._options: list[dict[str, Any]] = []
        self._keys = ProblemKeys()
        self._refs: OrderedDict[ProblemKey, Any] = OrderedDict()
        self._unshippable: set[ProblemKey] = set()
        self._session: Any = None
        """The Ray session (job, node) the actors and references belong to (another after a shutdown and a new
        ``ray.init``)."""

    # ------------------------------------------------------------------ measuring
    def _measure_batch(self, graph: OpGraph, cluster: Cluster, placements: Sequence[Placement]) -> list[Measurement]:
        if not placements:
            return []
        ray = self._ray()
        key = self._keys(graph, cluster)
        ref = self._ref(ray, key, graph, cluster)
        if ref is None:
            return [self.runtime.measure(graph, cluster, p) for p in placements]
        actors = self._loaded_actors(ray, key, ref)
        calls = [(i % len(actors), actors[i % len(actors)].measure.remote(key, [ref], p.devices))
                 for i, p in enumerate(placements)]
        results = self._collect(ray, calls)
        for i in [i for i, r in enumerate(results) if r is None]:
            results[i] = self._alone(ray, key, ref, placements[i])
        return results

    def _get(self, ray: Any, slot: int, call: Any) -> Measurement | None:
        """The call's measurement; ``None`` (and the actor marked dead) if its actor died."""
        try:
            return ray.get(call)
        except ray.exceptions.RayActorError:
            self._actors[slot] = None
            return None
        except ray.exceptions.RayError as err:  # a task error, or a result that did not travel back: no fault of
            # the placement's (the inner runtime's own errors come back as failed measurements), so not cached
            return Measurement.failure(self.id, f"Ray error: {type(err).__name__}: {error_summary(err)}",
                                       transient=True)

    def _collect(self, ray: Any, calls: list[tuple[int, Any]]) -> list[Measurement | None]:
        """The calls' measurements in order; ``None`` where the actor died (or was killed) before answering."""
        if self.timeout is None:
            return [self._get(ray, slot, call) for slot, call in calls]
        results: list[Measurement | None] = [None] * len(calls)
        queues: dict[int, deque[tuple[int, Any]]] = {}
        for i, (slot, call) in enumerate(calls):
            queues.setdefault(slot, deque()).append((i, call))
        started = dict.fromkeys(queues, time.monotonic())
        while queues:
            heads = {slot: queue[0] for slot, queue in queues.items()}
            wait_for = min(started[slot] for slot in heads) + self.timeout - time.monotonic()
            ready, _ = ray.wait([call for _, call in heads.values()], num_returns=1, timeout=max(0.0, wait_for))
            now = time.monotonic()
            for slot, (i, call) in heads.items():
                if call in ready:
                    results[i] = self._get(ray, slot, call)
                    queues[slot].popleft()
                    started[slot] = now
                elif now - started[slot] >= self.timeout:
                    results[i] = self._time_out(ray, slot)
                    queues[slot].clear()  # the calls behind it died with the actor: measured again alone
                if not queues[slot]:
                    del queues[slot]
        return results

    def _loaded_actors(self, ray: Any, key: ProblemKey, ref: Any, count: int | None = None) -> list[Any]:
        """The first ``count`` live actors (all by default); with a timeout, each has first read the (graph, cluster)
        and warmed up on it (:meth:`~gplace.runtime.parallel.Worker.warm_up`), untimed: sim-v1's first call in a
        process loads numba's kernels, seconds. Actors still warming up :data:`~gplace.runtime.parallel.WARM_UP`
        seconds past the timeout, or dying on it, are replaced and the graph is read without a warm-up."""
        actors = self._live_actors(ray)[:count]
        fresh = [slot for slot in range(len(actors)) if key not in self._loaded[slot]]
        if self.timeout is None or not fresh:
            return actors
        warm = key not in self._cold
        try:
            ray.get([actors[slot].load.remote(key, [ref], warm) for slot in fresh],
                    timeout=self.timeout + WARM_UP if warm else None)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError) as err:
            if not warm:
                return actors  # a dead actor: the measurements find it and replace it
            logger.warning("Ray actors died or took over %g s to read a graph and warm up on it (%s); replacing "
                           "them and measuring it without a warm-up", self.timeout + WARM_UP, type(err).__name__)
            self._cold.add(key)
            self._replace(ray, fresh)
            return self._loaded_actors(ray, key, ref, count)
        except ray.exceptions.RayError:  # another error (a task's, a fetch's): the measurements meet it again
            return actors
        for slot in fresh:
            self._loaded[slot].add(key)
        return actors

    def _replace(self, ray: Any, slots: list[int]) -> None:
        """Kill the actors of ``slots`` (dead or alive): the next :meth:`_live_actors` starts new ones there."""
        for slot in slots:
            ray.kill(self._actors[slot])
            self._actors[slot] = None

    def _time_out(self, ray: Any, slot: int) -> Measurement:
        """Kill the actor whose call ran past the timeout (it is replaced on the next measurement)."""
        logger.warning("a measurement ran past %g s on a Ray actor; replacing the actor", self.timeout)
        self._replace(ray, [slot])
        return Measurement.failure(self.id, f"timed out: no result after {self.timeout:g} s on a Ray actor "
                                            "(the actor was replaced)", transient=True)

    def _alone(self, ray: Any, key: ProblemKey, ref: Any, placement: Placement) -> Measurement:
        """Measure one placement by itself (nothing else queued); if its actor dies too, the placement is to blame."""
        actors = self._loaded_actors(ray, key, ref, count=1)
        slot = next(i for i, a in enumerate(self._actors) if a is actors[0])
        m = self._collect(ray, [(slot, actors[0].measure.remote(key, [ref], placement.devices))])[0]
        if m is None:
            return Measurement.failure(self.id, "Ray actor died while measuring this placement", transient=True)
        return m

    # ------------------------------------------------------------------ Ray, actors, object store
    def _ray(self) -> Any:
        from gplace.extras import require

        ray = require("ray", "ray", "RayRuntime")

        with _SESSION.lock:
            if not ray.is_initialized():
                ray.init(address=self.address, include_dashboard=False, logging_level=logging.WARNING)
                _SESSION.started = (_session_of(ray),)
                logger.debug("connected to Ray: %s", ray.cluster_resources())
            _SESSION.users.add(self)
        session = _session_of(ray)
        if session != self._session:  # Ray was shut down (by whoever) and started again: the handles are void
            self._actors, self._loaded, self._refs, self._session = [], [], OrderedDict(), session
        return ray

    def _live_actors(self, ray: Any) -> list[Any]:
        """The actors, dead ones replaced, started on first use."""
        if not self._actors:
            self._options = self._actor_options(ray)
            self._actors = [None] * len(self._options)
            self._loaded = [set() for _ in self._options]
        if self._runtime_blob is None:  # cloudpickle: a runtime class defined in __main__ or a function travels too
            self._runtime_blob = pickled_runtime(self.runtime, dumps=ray.cloudpickle.dumps)
        cls = ray.remote(_RayWorker)
        for i, actor in enumerate(self._actors):
            if actor is None:
                self._actors[i] = cls.options(**self._options[i]).remote(self._runtime_blob, self.threads_per_worker)
                self._loaded[i] = set()
        try:
            ray.get([a.ready.remote() for a in self._actors])
        except ray.exceptions.RayActorError as err:
            self._actors = [None] * len(self._options)
            name = type(self.runtime).__name__
            raise RuntimeError(f"Ray actors could not start {name}: {error_summary(err)}") from err
        return list(self._actors)

    def _actor_options(self, ray: Any) -> list[dict[str, Any]]:
        if self.resources_per_actor is not None:
            resources = dict(self.resources_per_actor)
            options = {"num_cpus": resources.pop("CPU", 1), "num_gpus": resources.pop("GPU", 0),
                       "resources": resources}
            count = self.num_actors or _fitting(ray.cluster_resources(), self.resources_per_actor)
            return [dict(options) for _ in range(count)]
        if self.num_actors is not None:
            return [{"num_cpus": 1} for _ in range(self.num_actors)]
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [node for node in ray.nodes() if node.get("Alive")]
        return [{"num_cpus": 1, "num_gpus": node.get("Resources", {}).get("GPU", 0),
                 "scheduling_strategy": NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)} for node in nodes]

    def _ref(self, ray: Any, key: ProblemKey, graph: OpGraph, cluster: Cluster) -> Any:
        """The object-store reference of the pickled (graph, cluster), put once; ``None`` if it cannot pickle."""
        if key in self._unshippable:
            return None
        if key not in self._refs:
            try:
                blob = pickle_for_workers((graph, cluster))
            except Exception as err:  # pickling can fail in many ways
                logger.warning("graph %r cannot be sent to Ray actors (%s); measuring it in this process",
                               graph.name, error_summary(err))
                self._unshippable.add(key)
                return None
            self._refs[key] = ray.put(blob)
            if len(self._refs) > 4:
                self._refs.popitem(last=False)
        self._refs.move_to_end(key)
        return self._refs[key]

    def close(self) -> None:
        """Kill the actors, drop the object-store references, and shut Ray down if a RayRuntime started it and no
        other open one uses it (runtimes that share a Ray session close in any order)."""
        if self._actors or self in _SESSION.users:
            import ray

            if ray.is_initialized() and _session_of(ray) == self._session:
                for actor in self._actors:
                    if actor is not None:
                        ray.kill(actor)
            self._actors, self._loaded, self._refs = [], [], OrderedDict()
            with _SESSION.lock:
                _SESSION.users.discard(self)
                if _SESSION.started is not None and not _SESSION.users:
                    if ray.is_initialized() and _session_of(ray) == _SESSION.started[0]:  # not one its user started
                        ray.shutdown()
                    _SESSION.started = None

    def __enter__(self) -> RayRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        """Pickles the settings and the inner runtime, not the actors or references."""
        return {**self.__dict__, "_actors": [], "_options": [], "_refs": OrderedDict(), "_session": None,
                "_loaded": [], "_cold": set()}


class _Session:
    """This process's Ray session as RayRuntimes use it: the session one of them started, and the open ones."""

    def __init__(self) -> None:
        self.lock = ForkSafeLock()
        self.started: tuple[tuple[str, str] | None] | None = None
        """``(session,)`` of the session a RayRuntime started (``(None,)`` where Ray does not say), else None."""
        self.users: weakref.WeakSet[RayRuntime] = weakref.WeakSet()


_SESSION = _Session()


def _session_of(ray: Any) -> tuple[str, str] | None:
    """This driver's Ray job and node: a new local Ray numbers its jobs from 1 again but has a new node, a driver
    joining a running cluster again gets a new job. ``None`` where Ray does not say (sessions not told apart)."""
    try:
        context = ray.get_runtime_context()
        return context.get_job_id(), context.get_node_id()
    except Exception:  # a Ray Client connection (ray://) may not answer: never worth failing a measurement for
        return None


def _fitting(total: Mapping[str, float], per_actor: Mapping[str, float]) -> int:
    """How many actors of ``per_actor`` resources the cluster's ``total`` holds (at least 1)."""
    counts = [math.floor(total.get(name, 0) / amount) for name, amount in per_actor.items() if amount > 0]
    return max(1, min(counts, default=1))
