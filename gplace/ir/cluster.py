"""Devices, the links between them, and the cluster they form."""

from __future__ import annotations

import hashlib
import math
import numbers
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.ir.errors import GraphError
from gplace.ir.frozen import frozen_array

if TYPE_CHECKING:
    from gplace.ir.graph import OpGraph

MIN_RATE = 1e-9
"""The least device speed and the least link bandwidth (bytes/s): times stay finite."""
MAX_SPEED = 1e9
"""The most device speed (the inverse of :data:`MIN_RATE`)."""
MAX_LATENCY = 1e12
"""The most seconds a link's latency may be."""
_NAMES_SHOWN = 8
"""How many device names an unknown-device error lists (then how many more there are)."""


@dataclass(frozen=True)
class Device:
    """One device a placement can use."""

    name: str
    """Unique name, e.g. ``"/GPU:0"``."""
    kind: str
    """Device kind, e.g. ``"cpu"`` or ``"gpu"``; ops' per-kind costs and pins refer to it."""
    speed: float = 1.0
    """Relative speed: an op's time on this device is its cost for ``kind`` divided by ``speed``."""
    memory: int | float = 2**63 - 1  # an int once built
    """Memory capacity in bytes; a whole-number float (``16e9``, as a config reads it) is taken as that int."""

    def __post_init__(self) -> None:
        if isinstance(self.memory, float | np.floating) and float(self.memory).is_integer():  # as the JSON reader
            object.__setattr__(self, "memory", int(self.memory))


MAX_DEVICES = 4096
"""The most devices a cluster holds: its bandwidth and latency are dense D x D matrices (and the simulators' per
channel state D x D too), so 100,000 devices asked for 75 GiB each before anything said why."""


def _as_record(kind: type, value: object, where: str) -> Any:
    """``value`` as a ``kind`` (:class:`Device` or :class:`Link`): itself, or built from a mapping of its fields."""
    if isinstance(value, kind):
        return value
    if not isinstance(value, Mapping):
        raise GraphError(f"{where} must be a gplace {kind.__name__} or a mapping of its fields, got {value!r}")
    known = [f.name for f in fields(kind)]
    unknown = [str(k) for k in value if k not in known]
    missing = [f.name for f in fields(kind) if f.name not in value and f.default is MISSING]
    if unknown or missing:
        wrong = f"unknown field {unknown[0]!r}" if unknown else f"no {missing[0]!r}"
        raise GraphError(f"{where} {dict(value)!r} has {wrong} (a {kind.__name__}'s fields: {', '.join(known)})")
    return kind(**{str(k): v for k, v in value.items()})


def check_device_count(count: int, where: str) -> None:
    """Refuse more than :data:`MAX_DEVICES` devices, naming ``where`` and the count.

    Raises:
        GraphError: ``count`` is above the limit.
    """
    if count > MAX_DEVICES:
        raise GraphError(f"{where}: {count:,} devices, more than the {MAX_DEVICES:,} a cluster may hold (its links "
                         f"are dense {count:,} x {count:,} matrices)")


@dataclass(frozen=True)
class Link:
    """A bidirectional link between two devices; each direction is its own channel, alike unless ``reverse_*``."""

    a: str
    b: str
    bandwidth: float
    """Bytes per second (from ``a`` to ``b``, and back unless ``reverse_bandwidth``)."""
    latency: float = 0.0
    """Seconds per transfer (from ``a`` to ``b``, and back unless ``reverse_latency``)."""
    reverse_bandwidth: float | None = None
    """Bytes per second from ``b`` to ``a`` where it differs (a calibrated link: host to GPU and back)."""
    reverse_latency: float | None = None
    """Seconds per transfer from ``b`` to ``a`` where it differs."""

    def directions(self) -> tuple[tuple[str, str, float, float], ...]:
        """``(src, dst, bandwidth, latency)`` of each direction."""
        back_bw = self.bandwidth if self.reverse_bandwidth is None else self.reverse_bandwidth
        back_lat = self.latency if self.reverse_latency is None else self.reverse_latency
        return (self.a, self.b, self.bandwidth, self.latency), (self.b, self.a, back_bw, back_lat)


@dataclass(frozen=True, eq=False)
class Cluster:
    """Devices and the bandwidth and latency between every ordered pair.

    Device indices are 0-based positions in ``devices``; placements refer to devices by index.
    Build one with :meth:`build` rather than by hand. Two clusters compare by identity, as graphs do: compare
    :attr:`fingerprint` for equal contents.
    """

    devices: tuple[Device, ...]
    bandwidth: np.ndarray = field(repr=False)
    """(D, D) float64, bytes per second from row device to column device; ``inf`` on the diagonal, whatever is
    given there (a device's own transfers are free)."""
    latency: np.ndarray = field(repr=False)
    """(D, D) float64, seconds per transfer; 0 on the diagonal, whatever is given there."""
    name: str = "cluster"

    def __post_init__(self) -> None:
        self._freeze()
        self.validate()

    def _freeze(self) -> None:
        """Store read-only copies of the matrices (the caller's stay theirs) with the diagonal set to ``inf``
        bandwidth and 0 latency, so a matrix given in full hashes as its JSON, which leaves the diagonal out; the
        devices as a tuple (the caller's list stays theirs: changing it changed the cluster after its checks)."""
        if not isinstance(self.devices, tuple):
            if isinstance(self.devices, str | bytes | Mapping) or not isinstance(self.devices, Iterable):
                raise GraphError(f"cluster {self.name!r}: devices must be a sequence of Device, got {self.devices!r}")
            object.__setattr__(self, "devices", tuple(self.devices))
        for label, own in (("bandwidth", np.inf), ("latency", 0.0)):
            arr = np.array(getattr(self, label))
            if arr.dtype.kind in "iuf" and arr.ndim == 2 and arr.shape[0] == arr.shape[1]:
                arr = arr.astype(np.float64)
                np.fill_diagonal(arr, own)
            object.__setattr__(self, label, frozen_array(arr))

    def __getstate__(self) -> dict[str, Any]:
        """Pickles the fields only; derived values (fingerprint, ``memory``) are rebuilt on use."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restores the fields read-only (numpy unpickles arrays writable), dropping any derived values."""
        self.__dict__.update({f.name: state[f.name] for f in fields(self) if f.name in state})
        self._freeze()

    @classmethod
    def build(
        cls,
        devices: Sequence[Device],
        links: Sequence[Link] | None = (),
        *,
        default_bandwidth: float | None = None,
        default_latency: float = 0.0,
        name: str = "cluster",
    ) -> Cluster:
        """Build a cluster; pairs without an explicit link use the defaults.

        ``devices`` and ``links`` may also be mappings of their fields (a config's dicts, and what Hydra makes of a
        ``_target_: gplace.Device`` inside a list: a config node of its fields); ``links=None`` is no links.

        Raises:
            GraphError: a device or link is neither one nor a mapping of its fields, two devices share a name, a link
                names an unknown device, or a pair has no link and no default.
        """
        _check_name(name)
        if isinstance(devices, str | bytes | Mapping) or not isinstance(devices, Iterable):
            raise GraphError(f"cluster {name!r}: devices must be a sequence of Device, got {devices!r}")
        devices = tuple(_as_record(Device, d, f"cluster {name!r}: device") for d in devices)
        if links is None:
            links = ()
        if isinstance(links, str | bytes | Mapping) or not isinstance(links, Iterable):
            raise GraphError(f"cluster {name!r}: links must be a sequence of Link, got {links!r}")
        links = [_as_record(Link, link, f"cluster {name!r}: link") for link in links]
        for label, value in (("default_bandwidth", default_bandwidth), ("default_latency", default_latency)):
            if value is None:
                continue
            if not _is_number(value):
                raise GraphError(f"cluster {name!r}: {label} must be a number, got {value!r}")
            _check_float(f"cluster {name!r}: {label}", value)
            if why := _out_of_range(label, value):
                raise GraphError(f"cluster {name!r}: {label} is {value:.4g}, {why}")
        check_device_count(len(devices), f"cluster {name!r}")
        index = {d.name: i for i, d in enumerate(devices)}
        if len(index) < len(devices):  # before the links: the last of two names would take both's links
            twice = next(d.name for i, d in enumerate(devices) if index[d.name] != i)
            raise GraphError(f"cluster {name!r}: duplicate device name {twice!r}")
        n = len(devices)
        bw = np.full((n, n), np.nan if default_bandwidth is None else float(default_bandwidth))
        lat = np.full((n, n), float(default_latency))
        given: set[tuple[str, str]] = set()
        for link in links:
            for end in (link.a, link.b):
                if end not in index:
                    raise GraphError(f"cluster {name!r}: link {link.a}<->{link.b} names unknown device {end!r}")
            for label in ("bandwidth", "latency", "reverse_bandwidth", "reverse_latency"):
                value = getattr(link, label)
                if label.startswith("reverse") and value is None:
                    continue
                if not _is_number(value):
                    raise GraphError(f"cluster {name!r}: link {link.a}<->{link.b} {label} must be a number, "
                                     f"got {value!r}")
                _check_float(f"cluster {name!r}: link {link.a}<->{link.b} {label}", value)
                if why := _out_of_range(label, value):
                    raise GraphError(f"cluster {name!r}: link {link.a}<->{link.b} has {label} {value:.4g}, {why}")
            if link.a == link.b:
                raise GraphError(f"cluster {name!r}: link {link.a}<->{link.b} joins a device to itself (a device's "
                                 "own transfers are free)")
            if (link.a, link.b) in given or (link.b, link.a) in given:
                raise GraphError(f"cluster {name!r}: two links between {link.a!r} and {link.b!r} (a link runs both "
                                 "ways: give the other direction's speed as reverse_bandwidth, reverse_latency)")
            given.add((link.a, link.b))
            for src, dst, bandwidth, latency in link.directions():
                bw[index[src], index[dst]], lat[index[src], index[dst]] = bandwidth, latency
        np.fill_diagonal(bw, np.inf)
        np.fill_diagonal(lat, 0.0)
        for i, j in zip(*np.nonzero(np.isnan(bw)), strict=True):
            raise GraphError(
                f"cluster {name!r}: no link between {devices[i].name!r} and {devices[j].name!r} "
                "and no default_bandwidth"
            )
        return cls(devices, bw, lat, name)

    def validate(self) -> None:
        """Check names, capacities, speeds and link matrices; raise :class:`GraphError` naming the field."""
        _check_name(self.name)
        if not self.devices:
            raise GraphError(f"cluster {self.name!r} has no devices")
        seen: set[str] = set()
        for d in self.devices:
            if not isinstance(d, Device):
                raise GraphError(f"cluster {self.name!r}: devices must be gplace Device objects, got {d!r}")
            if d.name in seen:
                raise GraphError(f"cluster {self.name!r}: duplicate device name {d.name!r}")
            seen.add(d.name)
            if not _is_text(d.name) or not _is_text(d.kind):
                raise GraphError(f"cluster {self.name!r}: device {d.name!r} needs a non-empty string name and kind, "
                                 f"got name {d.name!r}, kind {d.kind!r}")
            if not _is_number(d.speed):
                raise GraphError(f"cluster {self.name!r}: device {d.name!r} speed must be a number, got {d.speed!r}")
            if isinstance(d.memory, bool) or not isinstance(d.memory, int | np.integer):
                raise GraphError(f"cluster {self.name!r}: device {d.name!r} memory must be a whole number of bytes, "
                                 f"got {d.memory!r}")
            if d.memory > 2**63 - 1:
                raise GraphError(f"cluster {self.name!r}: device {d.name!r} has memory {d.memory}, more than the "
                                 f"largest supported ({2**63 - 1} bytes)")
            if not (MIN_RATE <= d.speed <= MAX_SPEED):
                raise GraphError(f"cluster {self.name!r}: device {d.name!r} has speed {d.speed}, must be in "
                                 f"[{MIN_RATE:.0e}, {MAX_SPEED:.0e}] (relative to the costs' speed 1)")
            if d.memory <= 0:
                raise GraphError(f"cluster {self.name!r}: device {d.name!r} has memory {d.memory}, must be > 0")
        n = len(self.devices)
        for label, arr in (("bandwidth", self.bandwidth), ("latency", self.latency)):
            if arr.dtype.kind not in "iuf":  # a bool matrix was 1 byte/s, a complex or object one crashed in numba
                raise GraphError(f"cluster {self.name!r}: {label} has dtype {arr.dtype}, expected numbers (float64)")
            if arr.shape != (n, n):
                raise GraphError(f"cluster {self.name!r}: {label} has shape {arr.shape}, expected {(n, n)}")
        off = ~np.eye(n, dtype=bool)
        for label, arr in (("bandwidth", self.bandwidth), ("latency", self.latency)):
            ok = arr >= MIN_RATE if label == "bandwidth" else (arr >= 0) & (arr <= MAX_LATENCY)
            bad = np.argwhere(off & ~ok)
            if len(bad):
                i, j = bad[0]
                raise GraphError(f"cluster {self.name!r}: {label} from {self.devices[i].name!r} to "
                                 f"{self.devices[j].name!r} is {arr[i, j]:.4g}, {_out_of_range(label, arr[i, j])}")

    @property
    def num_devices(self) -> int:
        """Number of devices D."""
        return len(self.devices)

    @cached_property
    def device_names(self) -> tuple[str, ...]:
        """Device names in index order."""
        return tuple(d.name for d in self.devices)

    @cached_property
    def kinds(self) -> tuple[str, ...]:
        """Device kinds in index order."""
        return tuple(d.kind for d in self.devices)

    @cached_property
    def speeds(self) -> np.ndarray:
        """(D,) float64 device speeds; read-only."""
        return frozen_array(np.array([d.speed for d in self.devices], dtype=np.float64))

    @cached_property
    def memory(self) -> np.ndarray:
        """(D,) int64 memory capacities in bytes; read-only."""
        return frozen_array(np.array([d.memory for d in self.devices], dtype=np.int64))

    @cached_property
    def fingerprint(self) -> str:
        """Content hash (sha256 hex, 16 chars) of devices and links.

        Values are hashed as plain Python numbers (a float speed, an int memory) and float64 matrices, so a speed
        of ``1``, ``1.0`` or ``np.float64(1.0)`` gives one fingerprint, as does a cluster read back from its JSON.
        """
        devices = [(str(d.name), str(d.kind), float(d.speed), int(d.memory)) for d in self.devices]
        h = hashlib.sha256(repr(devices).encode())
        for arr in (self.bandwidth, self.latency):
            h.update((np.ascontiguousarray(arr, dtype=np.float64) + 0.0).tobytes())  # + 0.0: -0.0 reads 0.0
        return h.hexdigest()[:16]

    def index(self, device_name: str) -> int:
        """Index of a device by name; raises :class:`GraphError` listing the first known names and their count."""
        try:
            return self.device_names.index(device_name)
        except ValueError:
            more = self.num_devices - _NAMES_SHOWN
            raise GraphError(
                f"unknown device {device_name!r}; cluster {self.name!r} has {self.num_devices} device(s): "
                f"{list(self.device_names[:_NAMES_SHOWN])}{f' and {more} more' if more > 0 else ''}"
            ) from None

    def transfer_time(self, nbytes: float, src: int, dst: int) -> float:
        """Seconds to move ``nbytes`` from device ``src`` to ``dst`` (indices) on an idle link.

        Raises:
            TypeError: ``nbytes`` is no number or an index no whole number (a device name: see :meth:`index`).
            ValueError: ``nbytes`` is negative or NaN (it gave a negative or NaN time).
            IndexError: an index outside the cluster.
        """
        if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Real):
            raise TypeError(f"transfer_time: nbytes must be a number of bytes, got {nbytes!r}")
        if not nbytes >= 0:  # also NaN
            raise ValueError(f"transfer_time: nbytes must be a number of bytes >= 0, got {nbytes!r}")
        for label, index in (("src", src), ("dst", dst)):
            if isinstance(index, bool) or not isinstance(index, numbers.Integral):
                raise TypeError(f"transfer_time: {label} must be a device index (cluster.index(name) gives one), "
                                f"got {index!r}")
            if not 0 <= index < self.num_devices:
                raise IndexError(f"{label} device index {index} is not in cluster {self.name!r} "
                                 f"(0..{self.num_devices - 1})")
        if src == dst:
            return 0.0
        return float(self.latency[src, dst] + nbytes / self.bandwidth[src, dst])


def _is_text(value: object) -> bool:
    """Whether ``value`` is a string with a character other than white space (a device named ``" "`` was accepted,
    and its kind ``" "`` costed nothing)."""
    return isinstance(value, str) and bool(value.strip())


def _check_name(name: object) -> None:
    """Refuse a cluster name that is no non-empty string (``None`` was written to a file its reader refused, a
    ``Path`` failed in the JSON encoder of a run)."""
    if not isinstance(name, str) or not name:
        raise GraphError(f"a cluster's name must be a non-empty string, got {name!r}")


def _out_of_range(label: str, value: float) -> str | None:
    """Why ``value``, a bandwidth or latency (``label`` ends with which), cannot be one, or ``None`` if it can."""
    if math.isnan(value):
        return "not a valid number"
    if label.endswith("bandwidth"):
        return None if value >= MIN_RATE else f"out of range: every bandwidth must be at least {MIN_RATE:.0e} bytes/s"
    return None if 0 <= value <= MAX_LATENCY else f"out of range: every latency must be in [0, {MAX_LATENCY:.0e}] s"


def _check_float(where: str, value: float) -> None:
    """Raise :class:`GraphError` naming ``where`` when ``value`` (a Python int) is past float64's range (it was a
    bare OverflowError)."""
    try:
        float(value)
    except OverflowError:
        raise GraphError(f"{where} is too large, more than the largest float64 ({sys.float_info.max:.4g})") from None


def _is_number(value: object) -> bool:
    """A real number that is not a bool (``True`` is an int to Python, not a rate)."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def misspelt_kinds(cluster: Cluster, graph: OpGraph) -> list[str]:
    """One line per device kind of ``cluster`` that the ops of ``graph`` have no cost for while they have one for a
    kind spelt alike but for case or spaces (``"GPU"`` for ``"gpu"``: kinds are compared as written), naming its
    devices: they run no op (ops costed per kind only) or the ops' generic ``cost`` in place of their cost for that
    kind, a mistake a CLI run warns of. A kind the ops are simply not costed for (a CPU beside a PipeDream
    profile's GPU costs) is no mistake, and not named."""
    if not graph.num_ops:
        return []
    runs = graph.allowed_devices(cluster).any(axis=0)
    found = []
    for kind in dict.fromkeys(cluster.kinds):
        meant = [k for k in graph.kind_cost if k != kind and k.strip().lower() == kind.strip().lower()]
        if not meant or kind in graph.kind_cost:
            continue
        devices = [i for i, d in enumerate(cluster.devices) if d.kind == kind]
        names = _listed([cluster.devices[i].name for i in devices])
        what = f"no op of graph {graph.name} may run on {names}" if not runs[devices].any() else \
            f"{names} run the ops of graph {graph.name} at their generic cost, not their cost for {meant[0]!r}"
        found.append(f"cluster {cluster.name}: {what}: their kind {kind!r} is not the ops' {meant[0]!r} (kinds are "
                     "compared as written)")
    return found


idle_devices = misspelt_kinds
"""The name :func:`misspelt_kinds` had until 2026-12-07 (it named only devices that run no op), kept for callers."""


def unlikely_units(cluster: Cluster, graph: OpGraph | None = None) -> list[str]:
    """What in ``cluster`` reads like a value in another unit than gplace's (bytes, bytes per second, seconds), one
    line each: a device's memory under 1 MB (``memory=16`` meant as GB), a link under 1 MB/s (6 meant as GB/s), a
    latency over one second (20 meant as milliseconds); with ``graph``, ops adding up to over a day of compute,
    each on its fastest device (costs in other units: a GiPH graph's are abstract units, read as seconds); none
    where every value is plausible. A CLI run warns with them: such a run goes on, every placement out of memory
    or its time dominated by transfers."""
    found = []
    if graph is not None and graph.num_ops:
        durations = graph.durations(cluster)
        fastest = np.where(np.isfinite(durations), durations, np.inf).min(axis=1)
        seconds = float(fastest[np.isfinite(fastest)].sum())
        if seconds > DAY:
            found.append(f"graph {graph.name}: its ops add up to {seconds / DAY:,.1f} days of compute on cluster "
                         f"{cluster.name}, each on its fastest device (op costs are in seconds, device speeds "
                         "relative to the reference; a GiPH graph's costs are its own units)")
    small = [d.name for d in cluster.devices if d.memory < 10**6]
    if small:
        found.append(f"cluster {cluster.name}: memory under 1 MB on {_listed(small)} (memory is in bytes: 16 GB "
                     "is 16e9)")
    off = ~np.eye(cluster.num_devices, dtype=bool)
    for values, wrong, what in ((cluster.bandwidth, cluster.bandwidth < 1e6, "a bandwidth under 1 MB/s "
                                 "(bandwidths are in bytes per second: 6 GB/s is 6e9)"),
                                (cluster.latency, cluster.latency > 1.0, "a latency over 1 s (latencies are in "
                                 "seconds: 20 us is 2e-5)")):
        pairs = np.argwhere(wrong & off)
        if pairs.size:
            names = cluster.device_names
            links = _listed([f"{names[a]} -> {names[b]}" for a, b in pairs])
            found.append(f"cluster {cluster.name}: {what}: {links}, e.g. {float(values[tuple(pairs[0])]):g}")
    return found


DAY = 86_400.0
"""Seconds in a day: ops adding up to more compute than this read like costs in another unit."""


def _listed(names: Sequence[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
