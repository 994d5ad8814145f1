"""Typed, frozen dataclass configs loaded from YAML with command-line overrides.

One mechanism for every config in speechlab, so a CLI never repeats the keywords of the
function it calls: :func:`add_config_args` derives ``--section.field`` options from the
dataclass, :func:`config_from_args` builds the config from ``--config FILE`` plus those options.

Overrides are ``dotted.key=value`` strings; values are parsed as YAML scalars/lists and then
checked against the field's annotated type.

Numeric ranges are declared next to the field, :func:`ranged`, and checked by
:func:`check_fields`, which every config dataclass calls first thing in ``__post_init__`` and
:func:`from_dict` calls again for any dataclass it builds. So a negative learning rate or a NaN
beam is refused where the config is loaded, naming the key, before any work is done::

    @dataclass(frozen=True)
    class OptimConfig:
        lr: float = ranged(1e-3, gt=0)
        betas: tuple[float, float] = ranged((0.9, 0.999), ge=0, lt=1)  # each element

        def __post_init__(self) -> None:
            check_fields(self)

NaN is never a valid number; inf is refused in a ranged field unless it says ``allow_inf``
(undeclared fields, e.g. of other papers' configs, only have NaN refused).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from speechlab.errors import ConfigError

T = TypeVar("T")


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check/convert ``value`` to the annotated type ``tp``; raise ConfigError naming ``key``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(f"config key {key!r}: {value!r} fits none of {tp}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"config key {key!r}: {value!r} is not one of {list(args)}")
        return value
    if _is_dataclass_type(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"config key {key!r}: expected a mapping, got {value!r}")
        return from_dict(tp, value, prefix=key + ".")
    if origin in (list, tuple):
        if isinstance(value, str):
            value = _yaml_value(value, key)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key {key!r}: expected a list, got {value!r}")
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], key) for v in value)
        if origin is tuple and args:
            if len(args) != len(value):
                raise ConfigError(f"config key {key!r}: expected {len(args)} values, got {value!r}")
            return tuple(_coerce(v, a, key) for v, a in zip(value, args))
        inner = args[0] if args else Any
        seq = [_coerce(v, inner, key) for v in value]
        return tuple(seq) if origin is tuple else seq
    if origin is dict:
        if isinstance(value, str):
            value = _yaml_value(value, key)
        if not isinstance(value, dict):
            raise ConfigError(f"config key {key!r}: expected a mapping, got {value!r}")
        kt, vt = args if args else (Any, Any)
        return {_coerce(k, kt, key): _coerce(v, vt, key) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(f"config key {key!r}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"config key {key!r}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
            try:  # "1e6" (YAML reads it as a string): a whole number written as a float
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number) and number.is_integer():
                return int(number)
        raise ConfigError(f"config key {key!r}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)  # accepts "inf", "1e-3"
            except ValueError:
                pass
        raise ConfigError(f"config key {key!r}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"config key {key!r}: expected a string, got {value!r}")
    if tp is Path:
        return Path(value)
    return value


def _yaml_value(text: str, key: str) -> Any:
    """An override's text parsed as YAML for a list or mapping field."""
    try:
        return load_yaml(text)
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or next(iter(str(e).splitlines()),
                                                       type(e).__name__)
        raise ConfigError(f"config key {key!r}: {text!r} is not a YAML list or mapping "
                          f"({problem})") from None


# ---------------------------------------------------------------------------------------------
# Numeric ranges


RANGE = "speechlab.range"  # key of a field's metadata holding its Range


@dataclass(frozen=True)
class Range:
    """The values a numeric field may take; for a tuple, list or dict field, each number in it.

    ``ge``/``gt`` and ``le``/``lt`` are inclusive/exclusive bounds (None: unbounded); ``why``
    says what a bound protects (an upper bound on a size, e.g. "the token FST has about N^2
    arcs") and is said with a value out of range.
    """

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    allow_inf: bool = False
    why: str = ""

    def problem(self, value: float) -> str | None:
        """Why ``value`` is out of range (``"must be > 0"``), or None if it is fine."""
        if math.isnan(value):
            return "must be a number"
        if math.isinf(value) and not self.allow_inf:
            return "must be finite"
        for bound, ok, word in ((self.ge, lambda b: value >= b, ">="),
                                (self.gt, lambda b: value > b, ">"),
                                (self.le, lambda b: value <= b, "<="),
                                (self.lt, lambda b: value < b, "<")):
            if bound is not None and not ok(bound):
                # ``why`` explains a maximum (what a larger value would cost)
                why = f" ({self.why})" if self.why and word in ("<=", "<") else ""
                return f"must be {word} {bound:g}{why}"
        return None


# Undeclared numeric fields: NaN is refused, inf allowed (it means "never" in some configs).
_ANY_NUMBER = Range(allow_inf=True)


def ranged(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
           ge: float | None = None, gt: float | None = None, le: float | None = None,
           lt: float | None = None, allow_inf: bool = False, why: str = "") -> Any:
    """A dataclass field whose number(s) must lie in a range (see :class:`Range`)."""
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={RANGE: Range(ge, gt, le, lt, allow_inf, why)})


def bounded(kind: type, *, ge: float | None = None, gt: float | None = None,
            le: float | None = None, lt: float | None = None, allow_inf: bool = False,
            why: str = "") -> Any:
    """An argparse ``type=`` for a numeric option that is not a config field: the option's
    number, or a usage error (exit 2, one line, before any work) saying the range and ``why``.
    Sizes get an upper bound here, where they enter, so a typo such as ``--phones 1000000000``
    is refused instead of growing until the kernel kills the process."""
    rng = Range(ge, gt, le, lt, allow_inf, why)

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            noun = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        problem = rng.problem(float(value))
        if problem is not None:
            raise argparse.ArgumentTypeError(f"{problem}, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def command_group(subparsers: argparse._SubParsersAction, name: str, help: str, *,
                  dest: str | None = None, metavar: str = "ACTION") -> argparse._SubParsersAction:
    """``speechlab NAME ACTION ...``: a command made of actions, one of which must be given;
    returns the subparsers to add the actions to (the choice lands in ``args.<dest>``,
    ``NAME_command`` by default)."""
    group = subparsers.add_parser(name, help=help)
    return group.add_subparsers(dest=dest or f"{name}_command", metavar=metavar, required=True)


class FieldError(ConfigError):
    """A config field whose value is out of its declared range."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key} {reason}")
        self.key = key
        self.reason = reason


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [value]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    return []


def check_fields(cfg: Any) -> None:
    """Raise :class:`FieldError` for the first field of dataclass ``cfg`` out of its range.

    Nested dataclasses are not descended into: each checks its own fields.
    """
    for f in dataclasses.fields(cfg):
        rng = f.metadata.get(RANGE, _ANY_NUMBER)
        for v in _numbers(getattr(cfg, f.name)):
            problem = rng.problem(float(v))
            if problem is not None:
                raise FieldError(f.name, f"{problem}, got {v!r}")


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Build dataclass ``cls`` from a (nested) dict, rejecting unknown keys and values out of
    their fields' ranges."""
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = set(data) - set(fields)
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {sorted(prefix + k for k in unknown)}; "
            f"known keys under {prefix or 'top level'}: {sorted(fields)}"
        )
    kwargs = {}
    for name, val in data.items():
        default = _field_default(fields[name])
        if isinstance(val, dict) and dataclasses.is_dataclass(default):
            # A section given in part keeps the rest of the field's own default (its
            # default_factory's values, not its class's).
            val = _over(to_dict(default), val, type(default))
        kwargs[name] = _coerce(val, hints[name], prefix + name)
    try:
        cfg = cls(**kwargs)
        check_fields(cfg)
    except FieldError as e:
        raise ConfigError(f"config key {prefix + e.key!r} {e.reason}") from None
    return cfg


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _over(default: dict[str, Any], given: dict[str, Any], cls: type) -> dict[str, Any]:
    """``given`` over ``default`` (a dataclass ``cls`` as a dict): nested sections merge,
    every other value (lists, mappings such as per-language weights) is replaced whole."""
    out = dict(default)
    hints = _hints(cls)
    for k, v in given.items():
        if (isinstance(v, dict) and isinstance(out.get(k), dict) and k in hints
                and _is_dataclass_type(hints[k])):
            out[k] = _over(out[k], v, hints[k])
        else:
            out[k] = v
    return out


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain nested dict of a dataclass config (tuples as lists, Paths as strings)."""

    def conv(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, Path):
            return str(v)
        return v

    return conv(cfg)


def _set_dotted(d: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
        if not isinstance(d, dict):
            raise ConfigError(f"override {key!r}: {p!r} is not a section")
    d[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """``"train.lr=1e-3"`` -> ``("train.lr", 0.001)`` (value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key=value")
    key, raw = text.split("=", 1)
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw  # a plain string; a list or mapping field says what it expected
    return key.strip(), value


class DuplicateKeyError(yaml.YAMLError):
    """A mapping in a YAML file names one key twice (line numbers are 1-based)."""

    def __init__(self, key: Any, line: int, first_line: int) -> None:
        super().__init__(f"duplicate key {key!r} (first at line {first_line})")
        self.key, self.line, self.first_line = key, line, first_line


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error: plain
    YAML keeps the last value without a word, so a config edited in two places would silently
    use one of them."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKeyError(key, line, seen[key])
            seen[key] = line
        return super().construct_mapping(node, deep)


def load_yaml(text: str) -> Any:
    """``text`` parsed as YAML with the safe loader, refusing duplicate keys
    (:class:`DuplicateKeyError`)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | None = None,
                base: T | None = None) -> T:
    """Load ``cls`` from ``base`` (or defaults), then a YAML ``path``, then ``key=value`` overrides."""
    data: dict[str, Any] = to_dict(base) if base is not None else {}
    if path is not None:
        path = Path(path)
        try:
            loaded = load_yaml(path.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path} is not UTF-8 text; give a YAML file") from None
        except DuplicateKeyError as e:
            raise ConfigError(f"config file {path}:{e.line}: key {e.key!r} is given twice (also "
                              f"at line {e.first_line}); keep one") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {path} is not valid YAML: {e}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at top level")
        _deep_update(data, loaded)
    for ov in overrides or []:
        k, v = parse_override(ov)
        _set_dotted(data, k, v)
    try:
        return from_dict(cls, data)
    except ConfigError as e:
        where = f" (from {path})" if path is not None else ""
        raise ConfigError(f"{e}{where}") from None


def _deep_update(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _deep_update(dst[k], v)
        else:
            dst[k] = v


def save_config(cfg: Any, path: str | Path) -> None:
    from speechlab.files import atomic_write_text

    atomic_write_text(Path(path), yaml.safe_dump(to_dict(cfg), sort_keys=False, allow_unicode=True))


def _flat_fields(cls: type, prefix: str = "", instance: Any = None
                 ) -> list[tuple[str, Any, Any]]:
    """(dotted name, type, default) of every leaf field; a nested section's defaults are
    those of the instance its parent gives it (``instance``), else of its class."""
    out = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints[f.name]
        default = getattr(instance, f.name) if instance is not None else _field_default(f)
        if _is_dataclass_type(tp):
            out.extend(_flat_fields(tp, prefix + f.name + ".",
                                    default if dataclasses.is_dataclass(default) else None))
        else:
            out.append((prefix + f.name, tp, default))
    return out


def add_config_args(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add ``--config FILE``, ``--set key=value`` and one ``--dotted.key`` option per field."""
    parser.add_argument("--config", type=Path, default=None, help="YAML config file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config key (repeatable)")
    group = parser.add_argument_group(f"{cls.__name__} options")
    for name, tp, default in _flat_fields(cls):
        group.add_argument(f"--{name}", dest=f"cfg__{name}", default=None, metavar="V",
                           help=f"(default: {default!r})")


def config_from_args(cls: type[T], args: argparse.Namespace, base: T | None = None) -> T:
    """Build ``cls`` from parsed args: base/defaults < --config file < --dotted options < --set."""
    overrides = []
    for name, _tp, _d in _flat_fields(cls):
        v = getattr(args, f"cfg__{name}", None)
        if v is not None:
            overrides.append(f"{name}={v}")
    overrides.extend(getattr(args, "overrides", []) or [])
    return load_config(cls, getattr(args, "config", None), overrides, base=base)
